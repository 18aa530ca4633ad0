// Bifaci v6 frames by hand, for the relay tests written in JavaScript: a small CBOR codec
// (only what frames use), the FNV-1a 64 chunk checksum, frame encoding and a frame reader.
// No package: node's Buffer only. Shared by host.js and switch.js.
"use strict";

// -- CBOR ---------------------------------------------------------------------------------------

/** A number that must go out as a double (END's progress), not as an integer. */
class Float {
  constructor(value) { this.value = value; }
}

function head(major, n) {
  if (typeof n === "bigint") {
    const b = Buffer.alloc(9); b[0] = (major << 5) | 27; b.writeBigUInt64BE(n, 1); return b;
  }
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) { const b = Buffer.alloc(3); b[0] = (major << 5) | 25; b.writeUInt16BE(n, 1); return b; }
  if (n < 0x100000000) { const b = Buffer.alloc(5); b[0] = (major << 5) | 26; b.writeUInt32BE(n, 1); return b; }
  const b = Buffer.alloc(9); b[0] = (major << 5) | 27; b.writeBigUInt64BE(BigInt(n), 1); return b;
}

/** Encode a value into a list of buffers (joined once by the caller: no copy per level). */
function encodeInto(v, out) {
  if (v === null || v === undefined) out.push(Buffer.from([0xf6]));
  else if (v === true) out.push(Buffer.from([0xf5]));
  else if (v === false) out.push(Buffer.from([0xf4]));
  else if (v instanceof Float) { const b = Buffer.alloc(9); b[0] = 0xfb; b.writeDoubleBE(v.value, 1); out.push(b); }
  else if (typeof v === "bigint") out.push(head(0, v));
  else if (typeof v === "number") {
    if (!Number.isInteger(v)) throw new Error("wrap a non-integer in Float: " + v);
    out.push(v >= 0 ? head(0, v) : head(1, -1 - v));
  } else if (Buffer.isBuffer(v)) { out.push(head(2, v.length)); out.push(v); }
  else if (typeof v === "string") { const s = Buffer.from(v, "utf8"); out.push(head(3, s.length)); out.push(s); }
  else if (Array.isArray(v)) { out.push(head(4, v.length)); for (const x of v) encodeInto(x, out); }
  else if (v instanceof Map) {
    out.push(head(5, v.size));
    for (const [k, x] of v) { encodeInto(k, out); encodeInto(x, out); }
  } else throw new Error("cannot encode " + typeof v);
}

function encode(v) { const out = []; encodeInto(v, out); return Buffer.concat(out); }

/** Decode one item at `pos`; returns [value, next position]. Maps decode to Map. */
function decodeAt(buf, pos) {
  const ib = buf[pos]; const major = ib >> 5; const info = ib & 31; pos += 1;
  if (major === 7) {
    if (info === 20) return [false, pos];
    if (info === 21) return [true, pos];
    if (info === 22 || info === 23) return [null, pos];
    if (info === 26) return [buf.readFloatBE(pos), pos + 4];
    if (info === 27) return [buf.readDoubleBE(pos), pos + 8];
    throw new Error("unsupported simple value " + info);
  }
  let n = info;
  if (info === 24) { n = buf[pos]; pos += 1; }
  else if (info === 25) { n = buf.readUInt16BE(pos); pos += 2; }
  else if (info === 26) { n = buf.readUInt32BE(pos); pos += 4; }
  else if (info === 27) {
    const big = buf.readBigUInt64BE(pos); pos += 8;
    n = big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
  } else if (info > 27) throw new Error("indefinite lengths never appear in a frame");
  switch (major) {
    case 0: return [n, pos];
    case 1: return [-1 - n, pos];
    case 2: return [buf.subarray(pos, pos + n), pos + n];
    case 3: return [buf.toString("utf8", pos, pos + n), pos + n];
    case 4: {
      const out = [];
      for (let i = 0; i < n; i++) { let x; [x, pos] = decodeAt(buf, pos); out.push(x); }
      return [out, pos];
    }
    case 5: {
      const out = new Map();
      for (let i = 0; i < n; i++) { let k, x; [k, pos] = decodeAt(buf, pos); [x, pos] = decodeAt(buf, pos); out.set(k, x); }
      return [out, pos];
    }
    case 6: return decodeAt(buf, pos); // a tag: its content
  }
  throw new Error("bad major type " + major);
}

function decode(buf) {
  const [value, end] = decodeAt(buf, 0);
  if (end !== buf.length) throw new Error("trailing bytes after a CBOR item");
  return value;
}

// -- FNV-1a 64, in two 32-bit halves (BigInt per byte is far too slow for MiBs) ------------------

function fnv1a64(bytes) {
  let hi = 0xcbf29ce4; let lo = 0x84222325;
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]) >>> 0;
    // h * 0x100000001b3 = h * 0x1b3 + (h << 40), modulo 2^64
    const low = lo * 0x1b3; // exact: below 2^41
    const carry = Math.floor(low / 0x100000000);
    hi = (Math.imul(hi, 0x1b3) + (lo << 8) + carry) >>> 0;
    lo = low >>> 0;
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

// -- frames ---------------------------------------------------------------------------------------

const T = {
  HELLO: 0, REQ: 1, CHUNK: 3, END: 4, LOG: 5, ERR: 6, HEARTBEAT: 7, STREAM_START: 8,
  STREAM_END: 9, RELAY_NOTIFY: 10, RELAY_STATE: 11, CANCEL: 12, CREDIT: 13, CLOSE_STREAM: 14,
  POLICY: 15,
};
const NAMES = Object.fromEntries(Object.entries(T).map(([k, v]) => [v, k]));
const FLOW = new Set([T.REQ, T.CHUNK, T.END, T.LOG, T.ERR, T.STREAM_START, T.STREAM_END]);

/** Field names of the frame map, by key (the order they are written in). */
const KEYS = [
  [4, "content_type"], [5, "meta"], [6, "payload"], [9, "eof"], [10, "cap"], [11, "stream_id"],
  [12, "media_urn"], [13, "xid"], [14, "chunk_index"], [15, "chunk_count"], [16, "checksum"],
  [17, "is_sequence"], [18, "force_kill"], [19, "credit"], [20, "unbounded"],
];

/** A frame as a plain object {type, id, seq, ...fields}, from its decoded CBOR map. */
function fromMap(m) {
  const f = { version: m.get(0), type: m.get(1), id: m.get(2), seq: m.has(3) ? m.get(3) : 0 };
  for (const [k, name] of KEYS) if (m.has(k)) f[name] = m.get(k);
  return f;
}

/** The 4-byte length prefix and CBOR body of a frame. */
function encodeFrame(f) {
  const m = new Map([[0, 6], [1, f.type], [2, f.id], [3, f.seq || 0]]);
  for (const [k, name] of KEYS) if (f[name] !== undefined) m.set(k, f[name]);
  const body = encode(m);
  const len = Buffer.alloc(4); len.writeUInt32BE(body.length, 0);
  return Buffer.concat([len, body]);
}

/** A printable key for an id or routing id (a 16-byte UUID or an unsigned integer). */
function idKey(id) {
  if (id === undefined) return "-";
  return Buffer.isBuffer(id) ? id.toString("hex") : "n" + String(id);
}

/** Numbers flow frames per (rid, xid) as the spec says: 0, 1, 2... dropped after a terminal. */
class Seqs {
  constructor() { this.next = new Map(); }
  stamp(f) {
    if (!FLOW.has(f.type)) { f.seq = 0; return f; }
    const key = idKey(f.id) + "/" + idKey(f.xid);
    const s = this.next.get(key) || 0;
    f.seq = s;
    if (f.type === T.END || f.type === T.ERR) this.next.delete(key); else this.next.set(key, s + 1);
    return f;
  }
}

/** Splits a byte stream into frames; `onFrame(frame, bodyLength)` for each one. */
class FrameReader {
  constructor(onFrame) { this.onFrame = onFrame; this.parts = []; this.size = 0; }
  feed(data) {
    this.parts.push(data); this.size += data.length;
    while (this.size >= 4) {
      let buf = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
      this.parts = [buf];
      const n = buf.readUInt32BE(0);
      if (buf.length < 4 + n) return;
      const body = buf.subarray(4, 4 + n);
      buf = buf.subarray(4 + n);
      this.parts = buf.length ? [buf] : []; this.size = buf.length;
      this.onFrame(fromMap(decode(body)), n);
    }
  }
}

function randomId() { return require("crypto").randomBytes(16); }

module.exports = {
  Float, encode, decode, fnv1a64, T, NAMES, FLOW, encodeFrame, fromMap, idKey, Seqs,
  FrameReader, randomId,
};
