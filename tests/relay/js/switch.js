// A relay switch written in JavaScript, speaking the relay's wire by hand (wire.js), to test our
// `cartridge host --listen PATH` from another language. It dials the host and checks, in turn:
//   1. the first frame is RELAY_NOTIFY (id 0, seq 0) with the meta keys and inventory of RLY-2/3;
//   2. a REQ before any POLICY is refused with ERR PROTOCOL_VIOLATION, routing id kept;
//   3. POLICY, then the identity probe: the nonce comes back end to end;
//   4. two echo requests routed at once (a uint and a UUID routing id), bodies larger than the
//      credit window: every response frame carries its routing id, seq counts 0, 1, 2... per
//      (rid, xid), chunk indexes, counts and checksums hold; RELAY_STATE and HEARTBEAT get no
//      answer; a peer call of the host's cartridge is served by this switch; a CANCEL ends a
//      request with an ERR;
//   5. frames in the wrong direction close the link: RELAY_NOTIFY, HELLO, a POLICY whose word
//      is unknown (a new link each), and the host still serves the link after.
// It prints one JSON summary on stdout; the pytest test asserts on it.
//
// Usage: node switch.js PATH
"use strict";
const net = require("net");
const crypto = require("crypto");
const { Float, encode, decode, fnv1a64, T, NAMES, FLOW, encodeFrame, idKey, Seqs, FrameReader, randomId } = require("./wire.js");

const PATH = process.argv[2];
const summary = {};

// -- a link: frames in a queue, read with a timeout ---------------------------------------------
class Link {
  constructor(socket) {
    this.socket = socket;
    this.seqs = new Seqs();
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    this.seen = false;
    this.reannounced = [];
    const reader = new FrameReader((f) => this.push(f));
    socket.on("data", (d) => reader.feed(d));
    socket.on("close", () => { this.closed = true; this.push(null); });
    socket.on("error", () => {});
  }
  push(f) {
    if (f !== null && f.type === T.RELAY_NOTIFY && this.seen) {
      // a re-announced inventory (RLY-2) may come at any time: counted, not queued
      this.reannounced.push({ id: f.id, seq: f.seq, meta_keys: [...f.meta.keys()] });
      return;
    }
    this.seen = true;
    if (this.waiters.length) this.waiters.shift()(f); else this.frames.push(f);
  }
  /** The next frame; null once the host closed the link; "timeout" after `ms`. */
  next(ms = 10000) {
    if (this.frames.length) return Promise.resolve(this.frames.shift());
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.waiters = this.waiters.filter((w) => w !== done); resolve("timeout"); }, ms);
      const done = (f) => { clearTimeout(timer); resolve(f); };
      this.waiters.push(done);
    });
  }
  send(f) { this.seqs.stamp(f); this.socket.write(encodeFrame(f)); }
  close() { this.socket.destroy(); }
}

function dial() {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 20000;
    const attempt = () => {
      const socket = net.connect(PATH);
      socket.once("connect", () => resolve(new Link(socket)));
      socket.once("error", (e) => {
        if (Date.now() > deadline) reject(e); else setTimeout(attempt, 100);
      });
    };
    attempt();
  });
}

// -- 1. RELAY_NOTIFY first ------------------------------------------------------------------------
const LIMITS = ["max_frame", "max_chunk", "max_reorder_buffer", "initial_credit"];
const RECORD_KEYS = ["registry_url", "id", "channel", "version", "sha256"];

function readNotify(f) {
  const out = { type: f === null || f === "timeout" ? String(f) : NAMES[f.type] };
  if (typeof f !== "object" || f === null || f.type !== T.RELAY_NOTIFY) return out;
  out.id = f.id; out.seq = f.seq;
  out.meta_keys = [...f.meta.keys()];
  out.limits = Object.fromEntries(LIMITS.map((k) => [k, f.meta.get(k)]));
  out.limits_positive = LIMITS.every((k) => Number.isInteger(f.meta.get(k)) && f.meta.get(k) > 0);
  const manifest = f.meta.get("manifest");
  out.manifest_is_bytes = Buffer.isBuffer(manifest);
  const inventory = JSON.parse(manifest.toString("utf8"));
  out.records = inventory.installed_cartridges.map((r) => ({
    id: r.id,
    keys_present: RECORD_KEYS.every((k) => k in r),
    channel: r.channel,
    sha256_hex: /^[0-9a-f]{64}$/.test(r.sha256),
    caps: (r.cap_groups || []).flatMap((g) => g.caps.map((c) => c.urn)),
    pools_object: typeof r.runtime_stats?.pools === "object" && r.runtime_stats.pools !== null,
    lifecycle: r.lifecycle === undefined ? null : r.lifecycle,
    attachment_error: r.attachment_error === undefined ? null : r.attachment_error,
  }));
  return out;
}

// -- requests ---------------------------------------------------------------------------------------
/** Send a request: REQ, one stream of `data` in chunks of `maxChunk`, END; the body waits for
 * the host's request credit once the window is spent. Resolves when the whole body is out. */
function request(link, call) {
  const { rid, xid, cap, data, maxChunk } = call;
  link.send({ type: T.REQ, id: rid, xid, cap, content_type: "application/cbor", payload: Buffer.alloc(0) });
  link.send({ type: T.STREAM_START, id: rid, xid, stream_id: "arg-0", media_urn: "media:", is_sequence: false });
  return (async () => {
    let index = 0;
    for (let at = 0; at < data.length; at += maxChunk) {
      while (call.inWindow <= 0) await new Promise((r) => call.grantWaiters.push(r));
      const payload = encode(data.subarray(at, at + maxChunk));
      link.send({ type: T.CHUNK, id: rid, xid, stream_id: "arg-0", chunk_index: index++, payload, checksum: fnv1a64(payload) });
      call.inWindow -= 1; call.sentChunks += 1;
    }
    link.send({ type: T.STREAM_END, id: rid, xid, stream_id: "arg-0", chunk_count: index });
    link.send({ type: T.END, id: rid, xid, eof: true });
  })();
}

/** Check one response frame of `call` against the spec, and keep its data. */
function takeResponse(link, call, f) {
  const r = call.response;
  r.frames += 1;
  if (f.xid === undefined || idKey(f.xid) !== idKey(call.xid)) r.xid_wrong += 1;
  if (FLOW.has(f.type)) {
    if (f.seq !== r.nextSeq) r.seq_wrong += 1;
    r.nextSeq = f.seq + 1;
    if (r.ended) r.after_terminal += 1;
  } else if (f.seq !== 0) r.seq_wrong += 1;
  switch (f.type) {
    case T.STREAM_START: r.streams += 1; break;
    case T.CHUNK: {
      if (f.chunk_index !== r.chunks) r.index_wrong += 1;
      if (BigInt(f.checksum) !== fnv1a64(f.payload)) r.checksum_wrong += 1;
      r.chunks += 1;
      r.parts.push(Buffer.from(decode(f.payload)));
      r.pending += 1;
      const batch = Math.max(1, Math.floor(call.window / 2));
      if (r.pending >= batch) { // the answer was consumed: give its credit back
        link.send({ type: T.CREDIT, id: call.rid, xid: call.xid, stream_id: f.stream_id, credit: r.pending, meta: new Map([["credit_dir", "response"]]) });
        r.granted += r.pending; r.pending = 0;
      }
      break;
    }
    case T.STREAM_END: if (f.chunk_count !== r.chunks) r.count_wrong += 1; break;
    case T.CREDIT: {
      r.credits += f.credit; call.inWindow += f.credit;
      while (call.grantWaiters.length) call.grantWaiters.shift()();
      break;
    }
    case T.END: r.ended = true; r.exit_code = f.meta && f.meta.get("exit_code"); break;
    case T.ERR: r.ended = true; r.err = f.meta && f.meta.get("code"); r.message = f.meta && f.meta.get("message"); break;
    case T.LOG: break;
    default: r.unexpected.push(NAMES[f.type]);
  }
}

function newCall(cap, xid, data, limits) {
  return {
    rid: randomId(), xid, cap, data, maxChunk: limits.max_chunk, window: limits.initial_credit,
    inWindow: limits.initial_credit, sentChunks: 0, grantWaiters: [],
    response: {
      frames: 0, xid_wrong: 0, seq_wrong: 0, nextSeq: 0, after_terminal: 0, streams: 0, chunks: 0,
      index_wrong: 0, checksum_wrong: 0, count_wrong: 0, credits: 0, granted: 0, pending: 0,
      parts: [], ended: false, exit_code: null, err: null, unexpected: [],
    },
  };
}

/** Read frames until every call ended; frames of no call are counted. */
async function serveCalls(link, calls, stray) {
  const byRid = new Map(calls.map((c) => [idKey(c.rid), c]));
  while (calls.some((c) => !c.response.ended)) {
    const f = await link.next();
    if (f === null || f === "timeout") { stray.push(String(f)); return; }
    const call = byRid.get(idKey(f.id));
    if (call === undefined) { stray.push(NAMES[f.type]); continue; }
    takeResponse(link, call, f);
  }
}

function report(call) {
  const r = { ...call.response };
  const data = Buffer.concat(r.parts);
  delete r.parts; delete r.pending; delete r.nextSeq;
  r.echoed = data.equals(call.data);
  r.body_chunks = call.sentChunks;
  r.window = call.window;
  return r;
}

/** cap:peer-echo on the host: its cartridge's peer REQ comes up here and is served by this
 * switch ("js:" + the input); the answer goes back down and out as peer-echo's result. */
async function peerCall(link, limits) {
  const call = newCall("cap:peer-echo", 11, Buffer.from("ping"), limits);
  await request(link, call);
  const peer = { rid: null, xid: undefined, cap: null, nextSeq: 0, seq_wrong: 0, xid_wrong: 0, parts: [], frames: [], credits: 0 };
  const stray = [];
  while (!call.response.ended) {
    const f = await link.next();
    if (f === null || f === "timeout") { stray.push(String(f)); break; }
    if (idKey(f.id) === idKey(call.rid)) { takeResponse(link, call, f); continue; }
    if (f.type === T.REQ && peer.rid === null) { peer.rid = f.id; peer.xid = f.xid; peer.cap = f.cap; }
    if (peer.rid === null || idKey(f.id) !== idKey(peer.rid)) { stray.push(NAMES[f.type]); continue; }
    // The cartridge returns credit for the answer it reads, whenever it reads it: before or
    // after the outer call's END, so credits are counted apart from the request's frames.
    if (f.type === T.CREDIT) { peer.credits += 1; continue; }
    peer.frames.push(NAMES[f.type]);
    if (idKey(f.xid) !== idKey(peer.xid)) peer.xid_wrong += 1;
    if (FLOW.has(f.type)) { if (f.seq !== peer.nextSeq) peer.seq_wrong += 1; peer.nextSeq = f.seq + 1; }
    if (f.type === T.CHUNK) peer.parts.push(Buffer.from(decode(f.payload)));
    if (f.type === T.END) {
      const payload = encode(Buffer.concat([Buffer.from("js:"), ...peer.parts]));
      const to = { id: peer.rid, xid: peer.xid };
      link.send({ type: T.STREAM_START, ...to, stream_id: "out", media_urn: "media:", is_sequence: false });
      link.send({ type: T.CHUNK, ...to, stream_id: "out", chunk_index: 0, payload, checksum: fnv1a64(payload) });
      link.send({ type: T.STREAM_END, ...to, stream_id: "out", chunk_count: 1 });
      link.send({ type: T.END, ...to, eof: true, meta: new Map([["exit_code", 0], ["progress", new Float(1.0)]]) });
    }
  }
  const r = report(call);
  return {
    cap: peer.cap, frames: peer.frames, seq_wrong: peer.seq_wrong, xid_wrong: peer.xid_wrong,
    result: Buffer.concat(call.response.parts).toString("utf8"), response: r, stray,
  };
}

/** cap:sleep for 30 s, cancelled after its first 300 ms: the ERR that ends it, as received. */
async function cancelled(link, limits) {
  const sleep = 'cap:in="media:fmt=json;record";out="media:enc=utf-8";sleep';
  const call = newCall(sleep, 21, Buffer.from('{"ms": 30000}'), limits);
  const rid = call.rid;
  link.send({ type: T.REQ, id: rid, xid: 21, cap: sleep, content_type: "application/cbor", payload: Buffer.alloc(0) });
  link.send({ type: T.STREAM_START, id: rid, xid: 21, stream_id: "arg-0", media_urn: "media:fmt=json;record" });
  const payload = encode(call.data);
  link.send({ type: T.CHUNK, id: rid, xid: 21, stream_id: "arg-0", chunk_index: 0, payload, checksum: fnv1a64(payload) });
  link.send({ type: T.STREAM_END, id: rid, xid: 21, stream_id: "arg-0", chunk_count: 1 });
  link.send({ type: T.END, id: rid, xid: 21, eof: true });
  const early = await link.next(300); // nothing, or the first frame of the answer
  link.send({
    type: T.CANCEL, id: rid, xid: 21, force_kill: false,
    meta: new Map([["code", "CANCELLED"], ["attribution_class", "user"], ["message", "Cancelled by user"]]),
  });
  const started = Date.now();
  if (early !== "timeout" && early !== null) takeResponse(link, call, early);
  const stray = [];
  await serveCalls(link, [call], stray);
  const r = report(call);
  return { err: r.err, xid_wrong: r.xid_wrong, seq_wrong: r.seq_wrong, ms: Date.now() - started, message: r.message, stray };
}

/** Send `frame` and tell whether the host closed the link after it (and what came first). */
async function refused(link, frame) {
  link.send(frame);
  const got = [];
  for (;;) {
    const f = await link.next(5000);
    if (f === null) return { closed: true, frames_before_close: got };
    if (f === "timeout") return { closed: false, frames_before_close: got };
    got.push(NAMES[f.type]);
  }
}

// -- the session ------------------------------------------------------------------------------------
async function main() {
  let link = await dial();
  const notify = readNotify(await link.next());
  summary.notify = notify;
  const limits = notify.limits;

  // 2. a REQ before POLICY
  const early = newCall("cap:echo", 99, Buffer.from("too early"), limits);
  await request(link, early);
  await serveCalls(link, [early], (summary.early_stray = []));
  summary.before_policy = { err: early.response.err, xid_wrong: early.response.xid_wrong, seq_wrong: early.response.seq_wrong };

  // 3. POLICY, then the identity probe
  link.send({ type: T.POLICY, id: 0, meta: new Map([["network", "full"]]) });
  const nonce = crypto.randomBytes(32);
  const probe = newCall("cap:effect=none", 1, nonce, limits);
  await request(link, probe);
  await serveCalls(link, [probe], (summary.probe_stray = []));
  summary.probe = report(probe);

  // 4. two requests at once, each larger than the window; then RELAY_STATE
  const big = Buffer.alloc(limits.max_chunk * (limits.initial_credit + 8));
  for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 11)) & 0xff;
  const small = Buffer.from("routed by a uuid routing id");
  const byUint = newCall("cap:echo", 7, big, limits);
  const byUuid = newCall("cap:echo", randomId(), small, limits);
  const stray = (summary.echo_stray = []);
  const served = serveCalls(link, [byUint, byUuid], stray);
  await Promise.all([request(link, byUint), request(link, byUuid)]);
  await served;
  summary.echo_uint = report(byUint);
  summary.echo_uuid = report(byUuid);
  link.send({ type: T.RELAY_STATE, id: 0, payload: Buffer.from("opaque resources") });
  link.send({ type: T.HEARTBEAT, id: randomId() });
  const afterState = await link.next(500);
  summary.state_answer = afterState === "timeout" ? null : afterState === null ? "closed" : NAMES[afterState.type];

  // a peer call: the host's cartridge calls cap:echo through this switch, which answers it
  summary.peer = await peerCall(link, limits);

  // a cancel: the host's cartridge is stopped and the request ends with an ERR
  summary.cancel = await cancelled(link, limits);

  // 5. frames in the wrong direction, one link each
  const reannounced = link.reannounced;
  summary.wrong_way = {};
  summary.wrong_way.relay_notify = await refused(link, {
    type: T.RELAY_NOTIFY, id: 0,
    meta: new Map([["manifest", Buffer.from('{"installed_cartridges": []}')], ["max_frame", 3670016], ["max_chunk", 262144], ["max_reorder_buffer", 64], ["initial_credit", 32]]),
  });
  link = await dial();
  summary.wrong_way.hello_first = readNotify(await link.next()).type;
  link.send({ type: T.POLICY, id: 0, meta: new Map([["network", "full"]]) });
  summary.wrong_way.hello = await refused(link, {
    type: T.HELLO, id: 0,
    meta: new Map([["max_frame", 3670016], ["max_chunk", 262144], ["max_reorder_buffer", 64], ["initial_credit", 32], ["version", 6]]),
  });
  link = await dial();
  await link.next();
  summary.wrong_way.unknown_policy = await refused(link, { type: T.POLICY, id: 0, meta: new Map([["network", "everything"]]) });

  // the host serves the next link as the first
  link = await dial();
  summary.last_link = readNotify(await link.next()).type;
  link.send({ type: T.POLICY, id: 0, meta: new Map([["network", "full"]]) });
  const last = newCall("cap:echo", 3, Buffer.from("still serving"), limits);
  await request(link, last);
  await serveCalls(link, [last], (summary.last_stray = []));
  summary.last_echo = report(last);
  summary.reannounced = reannounced.concat(link.reannounced);
  link.close();
}

main().then(
  () => { process.stdout.write(JSON.stringify(summary) + "\n"); process.exit(0); },
  (e) => { summary.error = String(e && e.stack || e); process.stdout.write(JSON.stringify(summary) + "\n"); process.exit(1); },
);
