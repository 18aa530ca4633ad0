// A cartridge host written in JavaScript, speaking the relay's wire by hand (wire.js), to test
// our engine's switch from another language. It announces one cartridge ("js-echo") with
// RELAY_NOTIFY, takes POLICY and RELAY_STATE, answers the identity probe, and serves:
//   js-echo     its input back, chunk by chunk, under flow control both ways;
//   js-reverse  its input reversed (offered once the test re-announces the inventory);
//   js-stall    never answers (the test kills the host mid-call), a CANCEL ends it.
//
// Usage: node host.js (--listen PATH | --connect PATH) [--bad-probe] [--max-chunk N]
//                     [--credit N] [--caps js-echo,js-stall]  (--caps "": no cartridge)
// stdout: one JSON object per line (events the test reads); stdin: one JSON command per line,
// {"cmd": "announce", "caps": [...]} (a new RELAY_NOTIFY) or {"cmd": "quit"}.
"use strict";
const fs = require("fs");
const net = require("net");
const readline = require("readline");
const { Float, encode, decode, fnv1a64, T, NAMES, FLOW, encodeFrame, idKey, Seqs, FrameReader } = require("./wire.js");

const IDENTITY = "cap:effect=none";
const CAPS = {
  "js-echo": "cap:op=js-echo",
  "js-reverse": "cap:op=js-reverse",
  "js-stall": "cap:op=js-stall",
};

// -- options ----------------------------------------------------------------------------------
const argv = process.argv.slice(2);
function option(name, fallback) {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
}
const LISTEN = option("--listen");
const CONNECT = option("--connect");
const BAD_PROBE = argv.includes("--bad-probe");
const MAX_CHUNK = Number(option("--max-chunk", "65536"));
const CREDIT = Number(option("--credit", "8"));
let offered = option("--caps", "js-echo,js-stall").split(",").filter(Boolean);

function emit(event) {
  process.stdout.write(JSON.stringify(event, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
}

// -- the inventory ----------------------------------------------------------------------------
function capDef(urn, title) {
  return {
    urn, title, aliases: [title.toLowerCase().replace(/\s+/g, "-")],
    args: [{ media_urn: "media:", name: "input", required: true, sources: [{ stdin: "media:" }], is_sequence: false, streaming: false }],
    outputs: [{ media_urn: "media:", name: "output", output_description: "the answer", optional: false, is_sequence: false, streaming: false }],
  };
}
function pool(caps) {
  const p = { declared: 0, configured: 0, active: 0, queued: 0 };
  return caps ? { ...p, caps } : p;
}
function inventory() {
  const urns = [IDENTITY, ...offered.map((n) => CAPS[n])];
  const pools = {};
  for (const u of [...urns].sort()) pools[u] = pool();
  pools.all = pool(urns);
  const record = {
    registry_url: null, id: "js-echo", channel: "release", version: "1.0.0", sha256: "ab".repeat(32),
    cap_groups: [{ name: "js", caps: [capDef(IDENTITY, "Identity"), ...offered.map((n) => capDef(CAPS[n], n))] }],
    runtime_stats: { running: true, pid: process.pid, active_request_count: requests.size, pools },
  };
  // no cap offered: no cartridge installed at all (the identity cap alone is a cap to probe)
  const installed = offered.length ? [record] : [];
  return Buffer.from(JSON.stringify({ installed_cartridges: installed }), "utf8");
}
function relayNotify() {
  const meta = new Map([["manifest", inventory()], ["max_frame", 3670016], ["max_chunk", MAX_CHUNK],
    ["max_reorder_buffer", 64], ["initial_credit", CREDIT]]);
  return { type: T.RELAY_NOTIFY, id: 0, meta };
}

// -- one link ---------------------------------------------------------------------------------
let link = null; // {socket, seqs}
let policy = null;
let state = null; // the latest RELAY_STATE payload: kept across links, never forwarded
const requests = new Map(); // rid key -> request

function send(f) {
  if (link === null) return;
  link.seqs.stamp(f);
  link.socket.write(encodeFrame(f));
}

function attach(socket) {
  link = { socket, seqs: new Seqs() };
  policy = null;
  requests.clear();
  send(relayNotify());
  emit({ event: "linked" });
  const reader = new FrameReader((f) => onFrame(f));
  socket.on("data", (d) => {
    try { reader.feed(d); } catch (e) { emit({ event: "error", message: String(e) }); socket.destroy(); }
  });
  socket.on("close", () => {
    if (link && link.socket === socket) { link = null; emit({ event: "closed" }); }
    if (CONNECT) setTimeout(dial, 200);
  });
  socket.on("error", () => {});
}

// -- frames from the switch -------------------------------------------------------------------
function onFrame(f) {
  if (f.type !== T.CHUNK && f.type !== T.CREDIT) {
    emit({ event: "frame", type: NAMES[f.type], seq: f.seq, cap: f.cap, xid: f.xid === undefined ? null : idKey(f.xid) });
  }
  switch (f.type) {
    case T.POLICY: policy = f.meta.get("network"); emit({ event: "policy", network: policy }); return;
    case T.RELAY_STATE: state = Buffer.from(f.payload); emit({ event: "state", payload: state.toString("hex") }); return;
    case T.HEARTBEAT: case T.LOG: return;
    case T.HELLO: case T.RELAY_NOTIFY:
      emit({ event: "refused", type: NAMES[f.type] }); link.socket.destroy(); return;
    case T.REQ: openRequest(f); return;
  }
  const r = requests.get(idKey(f.id));
  if (r === undefined) { emit({ event: "unrouted", type: NAMES[f.type] }); return; }
  if (f.xid === undefined || idKey(f.xid) !== idKey(r.xid)) r.xidMissing += 1;
  checkSeq(r, f);
  switch (f.type) {
    case T.STREAM_START: r.inStream = f.stream_id; startOutput(r); break;
    case T.CHUNK: takeChunk(r, f); break;
    case T.STREAM_END: break;
    case T.END: r.inputDone = true; drain(r); break;
    case T.CREDIT: r.outWindow += f.credit; r.creditsIn += f.credit; drain(r); break;
    case T.CANCEL:
      requests.delete(idKey(r.rid));
      errToSwitch(r, "CANCELLED", "cancelled by the switch", "user");
      emit({ event: "cancelled", cap: r.cap });
      break;
  }
}

/** Flow frames from the switch are numbered 0, 1, 2... per (rid, xid), the REQ first. */
function checkSeq(r, f) {
  if (!FLOW.has(f.type)) { if (f.seq !== 0) r.seqErrors += 1; return; }
  if (f.seq !== r.nextSeq) r.seqErrors += 1;
  r.nextSeq = f.seq + 1;
}

function errToSwitch(r, code, message, klass) {
  send({ type: T.ERR, id: r.rid, xid: r.xid, meta: new Map([["code", code], ["message", message], ["attribution_class", klass]]) });
}

function openRequest(f) {
  const key = idKey(f.id);
  if (policy === null && f.cap !== IDENTITY) {
    emit({ event: "before-policy", cap: f.cap });
    send({ type: T.ERR, id: f.id, xid: f.xid, meta: new Map([["code", "PROTOCOL_VIOLATION"], ["message", "no policy yet"], ["attribution_class", "internal"]]) });
    return;
  }
  const r = {
    rid: f.id, xid: f.xid, cap: f.cap, inStream: null, outStarted: false, outIndex: 0,
    inWindow: CREDIT, pendingGrant: 0, maxOutstanding: 0, violations: 0, badChecksums: 0,
    outWindow: CREDIT, creditsIn: 0, creditWaits: 0, queue: [], inputDone: false, bytes: 0,
    chunksIn: 0, xidMissing: f.xid === undefined ? 1 : 0, whole: [], nextSeq: 0, seqErrors: 0,
  };
  checkSeq(r, f);
  requests.set(key, r);
  emit({ event: "request", cap: f.cap, xid: f.xid === undefined ? null : idKey(f.xid) });
}

function startOutput(r) {
  if (r.outStarted || r.cap === CAPS["js-stall"]) return;
  r.outStarted = true;
  send({ type: T.STREAM_START, id: r.rid, xid: r.xid, stream_id: "out", media_urn: "media:", is_sequence: false });
}

function takeChunk(r, f) {
  r.chunksIn += 1;
  r.inWindow -= 1;
  if (r.inWindow < 0) r.violations += 1;
  r.maxOutstanding = Math.max(r.maxOutstanding, CREDIT - r.inWindow);
  if (BigInt(f.checksum) !== fnv1a64(f.payload)) r.badChecksums += 1;
  const data = decode(f.payload);
  r.bytes += data.length;
  if (r.cap === CAPS["js-echo"]) {
    r.queue.push(f); // echoed as it came: the same CBOR payload and checksum
  } else if (r.cap === IDENTITY && BAD_PROBE) {
    const wrong = Buffer.from(data); wrong[0] ^= 0xff;
    const payload = encode(wrong);
    r.queue.push({ payload, checksum: fnv1a64(payload) });
  } else if (r.cap === IDENTITY) {
    r.queue.push(f);
    emit({ event: "probe", nonce: Buffer.from(data).toString("hex") });
  } else {
    r.whole.push(Buffer.from(data));
    grant(r);
  }
  drain(r);
}

/** A chunk of the request was consumed: give its credit back, in batches of half a window. */
function grant(r) {
  r.pendingGrant += 1;
  const batch = Math.max(1, Math.floor(CREDIT / 2));
  if (r.pendingGrant >= batch || (r.queue.length === 0 && !r.inputDone)) {
    send({ type: T.CREDIT, id: r.rid, xid: r.xid, stream_id: r.inStream, credit: r.pendingGrant, meta: new Map([["credit_dir", "request"]]) });
    r.inWindow += r.pendingGrant;
    r.pendingGrant = 0;
  }
}

function drain(r) {
  if (!requests.has(idKey(r.rid)) || r.cap === CAPS["js-stall"]) return;
  while (r.queue.length > 0 && r.outWindow > 0) {
    const c = r.queue.shift();
    r.outWindow -= 1;
    send({ type: T.CHUNK, id: r.rid, xid: r.xid, stream_id: "out", chunk_index: r.outIndex++, payload: c.payload, checksum: c.checksum });
    if (r.cap !== CAPS["js-reverse"]) grant(r);
  }
  if (r.queue.length > 0) { r.creditWaits += 1; return; }
  if (!r.inputDone) return;
  if (r.cap === CAPS["js-reverse"]) {
    const payload = encode(Buffer.concat(r.whole).reverse());
    r.whole = [];
    r.cap = "done:" + r.cap; // sent once
    r.queue.push({ payload, checksum: fnv1a64(payload) });
    startOutput(r);
    drain(r);
    return;
  }
  requests.delete(idKey(r.rid));
  startOutput(r);
  send({ type: T.STREAM_END, id: r.rid, xid: r.xid, stream_id: "out", chunk_count: r.outIndex });
  send({ type: T.END, id: r.rid, xid: r.xid, eof: true, meta: new Map([["exit_code", 0], ["progress", new Float(1.0)]]) });
  emit({
    event: "served", cap: r.cap.replace(/^done:/, ""), bytes: r.bytes, chunks_in: r.chunksIn, chunks_out: r.outIndex,
    window: CREDIT, max_outstanding: r.maxOutstanding, violations: r.violations, bad_checksums: r.badChecksums,
    credit_waits: r.creditWaits, credits_in: r.creditsIn, xid_missing: r.xidMissing,
    seq_errors: r.seqErrors,
  });
}

// -- the socket -------------------------------------------------------------------------------
function dial() {
  const socket = net.connect(CONNECT);
  socket.once("connect", () => attach(socket));
  socket.once("error", () => { if (link === null || link.socket !== socket) setTimeout(dial, 200); });
}

if (LISTEN) {
  try { fs.unlinkSync(LISTEN); } catch (_e) { /* no stale socket */ }
  const server = net.createServer((socket) => {
    if (link !== null) { socket.destroy(); return; } // one switch at a time
    attach(socket);
  });
  server.listen(LISTEN, () => { fs.chmodSync(LISTEN, 0o600); emit({ event: "listening" }); });
} else if (CONNECT) {
  dial();
} else {
  process.stderr.write("usage: node host.js (--listen PATH | --connect PATH)\n");
  process.exit(2);
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const cmd = JSON.parse(line);
  if (cmd.cmd === "announce") { offered = cmd.caps; send(relayNotify()); emit({ event: "announced", caps: offered }); }
  else if (cmd.cmd === "quit") process.exit(0);
});
process.stdin.on("end", () => process.exit(0));
