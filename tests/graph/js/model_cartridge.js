// A "model" cartridge written in JavaScript, speaking Bifaci v6 frames by hand (its own small
// CBOR codec), to show that growth from inside a cartridge needs only the wire contract of
// the grow-graph cap. It follows the same rules as examples/agent/model.py.
//
// Environment: GRAPH_JS_MANIFEST (a manifest JSON file), GRAPH_JS_RULES (rules.jsonl),
// GRAPH_JS_CAP (the cap it serves), GRAPH_JS_NO_PARENT=1 (leave "parent" out of batches).
"use strict";
const fs = require("fs");
const crypto = require("crypto");

// -- CBOR -----------------------------------------------------------------------------------
function head(major, n) {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) { const b = Buffer.alloc(3); b[0] = (major << 5) | 25; b.writeUInt16BE(n, 1); return b; }
  if (n < 0x100000000) { const b = Buffer.alloc(5); b[0] = (major << 5) | 26; b.writeUInt32BE(n, 1); return b; }
  const b = Buffer.alloc(9); b[0] = (major << 5) | 27; b.writeBigUInt64BE(BigInt(n), 1); return b;
}
function enc(v) {
  if (v === null || v === undefined) return Buffer.from([0xf6]);
  if (v === true) return Buffer.from([0xf5]);
  if (v === false) return Buffer.from([0xf4]);
  if (typeof v === "bigint") { const b = Buffer.alloc(9); b[0] = 0x1b; b.writeBigUInt64BE(v, 1); return b; }
  if (typeof v === "number") {
    if (Number.isInteger(v) && !Object.is(v, -0) && !(v instanceof Float)) return v >= 0 ? head(0, v) : head(1, -1 - v);
  }
  if (v instanceof Float) { const b = Buffer.alloc(9); b[0] = 0xfb; b.writeDoubleBE(v.value, 1); return b; }
  if (Buffer.isBuffer(v)) return Buffer.concat([head(2, v.length), v]);
  if (typeof v === "string") { const s = Buffer.from(v, "utf8"); return Buffer.concat([head(3, s.length), s]); }
  if (Array.isArray(v)) return Buffer.concat([head(4, v.length), ...v.map(enc)]);
  if (v instanceof Map) {
    const parts = [head(5, v.size)];
    for (const [k, x] of v) parts.push(enc(k), enc(x));
    return Buffer.concat(parts);
  }
  const keys = Object.keys(v);
  return Buffer.concat([head(5, keys.length), ...keys.flatMap((k) => [enc(k), enc(v[k])])]);
}
function Float(value) { if (!(this instanceof Float)) return new Float(value); this.value = value; }
function dec(buf, pos) {
  const ib = buf[pos]; const major = ib >> 5; const info = ib & 31; pos += 1;
  let n = info;
  if (major === 7) {
    if (info === 20) return [false, pos];
    if (info === 21) return [true, pos];
    if (info === 22 || info === 23) return [null, pos];
    if (info === 25) { return [decodeHalf(buf.readUInt16BE(pos)), pos + 2]; }
    if (info === 26) return [buf.readFloatBE(pos), pos + 4];
    if (info === 27) return [buf.readDoubleBE(pos), pos + 8];
    throw new Error("bad simple value " + info);
  }
  if (info === 24) { n = buf[pos]; pos += 1; }
  else if (info === 25) { n = buf.readUInt16BE(pos); pos += 2; }
  else if (info === 26) { n = buf.readUInt32BE(pos); pos += 4; }
  else if (info === 27) { const big = buf.readBigUInt64BE(pos); pos += 8; n = big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big; }
  else if (info > 27) throw new Error("indefinite lengths are not used here");
  switch (major) {
    case 0: return [n, pos];
    case 1: return [-1 - n, pos];
    case 2: return [buf.subarray(pos, pos + n), pos + n];
    case 3: return [buf.subarray(pos, pos + n).toString("utf8"), pos + n];
    case 4: { const out = []; for (let i = 0; i < n; i++) { let x; [x, pos] = dec(buf, pos); out.push(x); } return [out, pos]; }
    case 5: { const out = new Map(); for (let i = 0; i < n; i++) { let k, x; [k, pos] = dec(buf, pos); [x, pos] = dec(buf, pos); out.set(k, x); } return [out, pos]; }
    case 6: return dec(buf, pos); // a tag: its content
  }
  throw new Error("bad major type");
}
function decodeHalf(h) {
  const s = h & 0x8000 ? -1 : 1; const e = (h >> 10) & 31; const f = h & 1023;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

// -- frames -----------------------------------------------------------------------------------
const T = { HELLO: 0, REQ: 1, CHUNK: 3, END: 4, LOG: 5, ERR: 6, HEARTBEAT: 7, STREAM_START: 8,
  STREAM_END: 9, CANCEL: 12, CREDIT: 13, CLOSE_STREAM: 14, POLICY: 15 };
function fnv1a64(bytes) {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) { h ^= BigInt(b); h = (h * 0x100000001b3n) & 0xffffffffffffffffn; }
  return h;
}
const seqs = new Map();
function nextSeq(id, xid) {
  const key = Buffer.isBuffer(id) ? id.toString("hex") + "/" + (xid === undefined ? "" : String(Buffer.isBuffer(xid) ? xid.toString("hex") : xid)) : "0";
  const s = seqs.get(key) || 0; seqs.set(key, s + 1); return s;
}
function send(fields, flow) {
  const m = new Map([[0, 6], [1, fields.type], [2, fields.id], [3, flow ? nextSeq(fields.id, fields.xid) : 0]]);
  const order = [[4, "content_type"], [5, "meta"], [6, "payload"], [9, "eof"], [10, "cap"], [11, "stream_id"],
    [12, "media_urn"], [13, "xid"], [14, "chunk_index"], [15, "chunk_count"], [16, "checksum"], [17, "is_sequence"]];
  for (const [k, name] of order) if (fields[name] !== undefined) m.set(k, fields[name]);
  const body = enc(m); const len = Buffer.alloc(4); len.writeUInt32BE(body.length, 0);
  process.stdout.write(Buffer.concat([len, body]));
}
function sendStream(rid, xid, streamId, media, bytes) {
  send({ type: T.STREAM_START, id: rid, xid, stream_id: streamId, media_urn: media, is_sequence: false }, true);
  const payload = enc(bytes);
  send({ type: T.CHUNK, id: rid, xid, stream_id: streamId, chunk_index: 0, payload, checksum: fnv1a64(payload) }, true);
  send({ type: T.STREAM_END, id: rid, xid, stream_id: streamId, chunk_count: 1 }, true);
}
function sendEnd(rid, xid) {
  send({ type: T.END, id: rid, xid, eof: true, meta: new Map([["exit_code", 0], ["progress", Float(1.0)]]) }, true);
}
function sendErr(rid, xid, code, message, klass) {
  send({ type: T.ERR, id: rid, xid, meta: new Map([["code", code], ["message", message], ["attribution_class", klass]]) }, true);
}

// -- the cartridge ------------------------------------------------------------------------------
const manifest = fs.readFileSync(process.env.GRAPH_JS_MANIFEST);
const rules = fs.readFileSync(process.env.GRAPH_JS_RULES, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const MY_CAP = process.env.GRAPH_JS_CAP;
const CHAT = "media:chat;jsonl";
const SPEC = "media:tool-spec;json";
const TOOL_OUT = "media:tool-output;enc=utf-8";
const TOOL_MESSAGE = 'cap:in="media:tool-output;enc=utf-8";op=tool-message;out="media:chat;jsonl"';
const GROW = 'cap:in="media:graph-ops;json";op=grow-graph;out="media:graph-results;json"';
const poolEntry = () => new Map([["declared", 0], ["configured", 0], ["active", 0], ["queued", 0]]);
const pools = Buffer.from(JSON.stringify({ all: { declared: 0, configured: 0, active: 0, queued: 0, caps: [] } }));
void poolEntry;

let helloDone = false;
const requests = new Map(); // rid hex -> {rid, xid, cap, chunks: []}
const peers = new Map(); // peer rid hex -> {onDone}

function onFrame(f) {
  const type = f.get(1); const id = f.get(2); const xid = f.get(13);
  if (!helloDone) {
    if (type !== T.HELLO) process.exit(2);
    const meta = f.get(5);
    const mine = new Map([["max_frame", meta.get("max_frame")], ["max_chunk", meta.get("max_chunk")],
      ["max_reorder_buffer", meta.get("max_reorder_buffer")], ["initial_credit", meta.get("initial_credit")],
      ["version", 6], ["manifest", manifest], ["pools", pools]]);
    send({ type: T.HELLO, id: 0, meta: mine }, false);
    helloDone = true;
    return;
  }
  if (type === T.HEARTBEAT) {
    send({ type: T.HEARTBEAT, id, meta: new Map([["drops_total", 0], ["stragglers_total", 0], ["overruns_total", 0], ["pools", pools]]) }, false);
    return;
  }
  if (type === T.POLICY || type === T.CREDIT || type === T.LOG) return;
  const key = Buffer.isBuffer(id) ? id.toString("hex") : String(id);
  if (peers.has(key)) { peers.get(key)(f); return; }
  if (type === T.REQ) { requests.set(key, { rid: id, xid, cap: f.get(10), chunks: [] }); return; }
  const r = requests.get(key);
  if (!r) return;
  if (type === T.CHUNK) {
    const [value] = dec(f.get(6), 0);
    r.chunks.push(Buffer.isBuffer(value) ? value : Buffer.from(String(value), "utf8"));
  } else if (type === T.CANCEL) {
    requests.delete(key);
    sendErr(r.rid, r.xid, "CANCELLED", "Request cancelled", "user");
  } else if (type === T.END) {
    requests.delete(key);
    const input = Buffer.concat(r.chunks);
    if (r.cap === "cap:effect=none" || !r.cap.includes("model")) {
      sendStream(r.rid, r.xid, "identity", "media:", input);
      sendEnd(r.rid, r.xid);
    } else {
      serveModel(r, input.toString("utf8"));
    }
  }
}

function keyOf(m) { return m.role === "tool" ? "tool:" + m.name : String(m.role); }

function serveModel(r, text) {
  const chat = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  const last = chat[chat.length - 1];
  const rule = rules.find((x) => x.after === keyOf(last));
  if (!rule) { sendErr(r.rid, r.xid, "NO_RULE", "no rule after " + keyOf(last), "input"); return; }
  if (rule.answer !== undefined) {
    const facts = {};
    for (const m of chat) if (m.role === "tool") facts[m.name] = m.content;
    const answer = rule.answer.replace(/\{(\w+)\}/g, (_, k) => facts[k]);
    sendStream(r.rid, r.xid, "answer", "media:enc=utf-8", Buffer.from(answer, "utf8"));
    sendEnd(r.rid, r.xid);
    return;
  }
  const call = rule.call;
  const callId = "call-" + (chat.filter((m) => m.role === "tool").length + 1);
  const ops = [
    { op: "detach_from_alias", alias: "chat" },
    { op: "add_value_node", value: JSON.stringify({ role: "assistant", tool_call: { id: callId, name: call.tool } }) + "\n", media: CHAT, explain: "tool call" },
    { op: "alias", alias: "chat", node: "$1" },
    { op: "add_value_node", value: JSON.stringify(call.arguments), media: call.in, explain: "input of " + call.tool },
    { op: "instantiate_with_deps", cap: call.cap, deps: { [call.in]: "$3" }, explain: call.tool },
    { op: "add_value_node", value_b64: Buffer.from(JSON.stringify({ id: callId, name: call.tool })).toString("base64"), media: SPEC, explain: "tool spec" },
    { op: "instantiate_with_deps", cap: TOOL_MESSAGE, deps: { [TOOL_OUT]: "$4", [SPEC]: "$5" }, explain: "tool result" },
    { op: "alias", alias: "chat", node: "$6" },
    { op: "instantiate_with_deps", cap: MY_CAP, deps: { [CHAT]: ["chat"] }, explain: "model (js)" },
    { op: "alias", alias: "answers", node: "$8" },
  ];
  const batch = { ops };
  if (process.env.GRAPH_JS_NO_PARENT !== "1") batch.parent = r.rid.toString("hex");
  const prid = crypto.randomBytes(16);
  const parts = [];
  peers.set(prid.toString("hex"), (f) => {
    const type = f.get(1);
    if (type === T.CHUNK) { const [v] = dec(f.get(6), 0); parts.push(Buffer.isBuffer(v) ? v : Buffer.from(String(v))); }
    else if (type === T.END) {
      peers.delete(prid.toString("hex"));
      const results = JSON.parse(Buffer.concat(parts).toString("utf8")).results;
      process.stderr.write("js model: grew " + JSON.stringify(results) + "\n");
      sendEnd(r.rid, r.xid);
    } else if (type === T.ERR) {
      peers.delete(prid.toString("hex"));
      const meta = f.get(5);
      sendErr(r.rid, r.xid, meta.get("code"), "growth refused: " + meta.get("message"), meta.get("attribution_class"));
    }
  });
  send({ type: T.REQ, id: prid, cap: GROW, content_type: "application/cbor", payload: Buffer.alloc(0) }, true);
  sendStream(prid, undefined, "ops", "media:graph-ops;json", Buffer.from(JSON.stringify(batch), "utf8"));
  send({ type: T.END, id: prid, eof: true }, true);
}

let pending = Buffer.alloc(0);
process.stdin.on("data", (data) => {
  pending = Buffer.concat([pending, data]);
  while (pending.length >= 4) {
    const n = pending.readUInt32BE(0);
    if (pending.length < 4 + n) break;
    const body = pending.subarray(4, 4 + n);
    pending = pending.subarray(4 + n);
    const [frame] = dec(body, 0);
    onFrame(frame);
  }
});
process.stdin.on("end", () => process.exit(0));
