"""Shared loader for the recorded frame vectors in ``protocol_spec/vectors/frames``.

Used by the vector, codec and fuzz tests. Frames of 64 KiB or more are stored truncated
(first 256 bytes plus a sha256); :func:`reconstruct` rebuilds those whose payload is the
counting pattern the recording cartridge sends (checked against the stored checksum and
sha256), so that every decoder path can be fed complete sessions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import attrs
import cbor2

from cartridge_runtime.protocol import Frame, FrameType, MessageId, checksum, encode_body

VECTOR_DIR = Path(__file__).resolve().parent.parent / "protocol_spec" / "vectors" / "frames"

#: Meta values that are JSON inside a byte string on the wire, shown parsed in ``decoded``.
JSON_META = frozenset({"manifest", "pools", "desired_capacities"})

#: ``decoded`` cuts payloads longer than this to their first 64 bytes of hex plus "...".
CUT_OVER = 1024


@attrs.frozen(kw_only=True)
class VectorFrame:
    """One line of a vector file."""

    file: str
    line: int
    dir: str
    type: str
    phase: str
    frame_len: int
    hex: str
    truncated: bool
    sha256: str | None
    decoded: dict[str, Any]
    payload_cbor: Any  # MISSING when absent
    raw: bytes | None  # the whole frame when known (stored or reconstructed)


MISSING = object()


def vector_files() -> list[Path]:
    return sorted(VECTOR_DIR.rglob("*.jsonl"))


def file_id(path: Path) -> str:
    return str(path.relative_to(VECTOR_DIR))


@cache
def load(path: Path) -> tuple[VectorFrame, ...]:
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        d = json.loads(line)
        truncated = bool(d.get("hex_truncated"))
        vf = VectorFrame(
            file=file_id(path),
            line=i,
            dir=d["dir"],
            type=d["type"],
            phase=d["phase"],
            frame_len=d["frame_len"],
            hex=d["hex"],
            truncated=truncated,
            sha256=d.get("sha256"),
            decoded=d["decoded"],
            payload_cbor=d.get("payload_cbor", MISSING),
            raw=None if truncated else bytes.fromhex(d["hex"]),
        )
        if truncated:
            vf = attrs.evolve(vf, raw=reconstruct(vf))
        out.append(vf)
    return tuple(out)


def all_frames() -> Iterator[VectorFrame]:
    for p in vector_files():
        yield from load(p)


def to_json(value: Any) -> Any:
    """A CBOR value in the conventions of ``decoded`` (bytes as hex, keys as strings)."""
    if isinstance(value, bytes):
        return value.hex() if len(value) <= CUT_OVER else value[:64].hex() + "..."
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


def _id_json(mid: MessageId) -> Any:
    return mid.value.hex() if isinstance(mid.value, bytes) else mid.value


def frame_to_decoded(frame: Frame) -> dict[str, Any]:
    """Our frame, written the way the vectors' ``decoded`` field writes a CBOR map."""
    d: dict[str, Any] = {
        "0": frame.version,
        "1": int(frame.frame_type),
        "2": _id_json(frame.id),
        "3": frame.seq,
    }
    fields = (
        (4, frame.content_type),
        (5, frame.meta),
        (6, frame.payload),
        (7, frame.len),
        (8, frame.offset),
        (9, frame.eof),
        (10, frame.cap),
        (11, frame.stream_id),
        (12, frame.media_urn),
        (13, None if frame.routing_id is None else _id_json(frame.routing_id)),
        (14, frame.chunk_index),
        (15, frame.chunk_count),
        (16, frame.checksum),
        (17, frame.is_sequence),
        (18, frame.force_kill),
        (19, frame.credit),
        (20, frame.unbounded),
        (21, frame.output),
    )
    for key, value in fields:
        if value is None:
            continue
        if key == 5:
            value = {
                k: json.loads(v) if k in JSON_META and isinstance(v, bytes) else to_json(v)
                for k, v in value.items()
            }
        else:
            value = to_json(value)
        d[str(key)] = value
    return d


def _mid(v: Any) -> MessageId:
    return MessageId(bytes.fromhex(v)) if isinstance(v, str) else MessageId(v)


def decoded_to_frame(d: dict[str, Any], payload: bytes | None) -> Frame:
    """Build a frame from a ``decoded`` map. Used only for truncated frames (large CHUNKs),
    whose meta is absent or holds no JSON byte strings, so it is taken as it stands."""
    meta = d.get("5")
    return Frame(
        frame_type=FrameType(d["1"]),
        id=_mid(d["2"]),
        seq=d["3"],
        version=d["0"],
        content_type=d.get("4"),
        meta=meta,
        payload=payload,
        len=d.get("7"),
        offset=d.get("8"),
        eof=d.get("9"),
        cap=d.get("10"),
        stream_id=d.get("11"),
        media_urn=d.get("12"),
        routing_id=None if d.get("13") is None else _mid(d["13"]),
        chunk_index=d.get("14"),
        chunk_count=d.get("15"),
        checksum=d.get("16"),
        is_sequence=d.get("17"),
        force_kill=d.get("18"),
        credit=d.get("19"),
        unbounded=d.get("20"),
        output=d.get("21"),
    )


def bstr_head_len(n: int) -> int:
    return 1 if n < 24 else 2 if n < 0x100 else 3 if n < 0x10000 else 5


def reconstruct(vf: VectorFrame) -> bytes | None:
    """Rebuild a truncated frame whose payload continues its visible head by counting bytes
    (+1 mod 256), as the recording cartridge's test data does. Returns the whole frame only
    when both the CHUNK checksum and the stored sha256 confirm it; otherwise ``None``."""
    cut = vf.decoded.get("6")
    if vf.type != "CHUNK" or not isinstance(cut, str) or not cut.endswith("..."):
        return None
    head = bytes.fromhex(cut[:-3])
    empty = len(encode_body(decoded_to_frame(vf.decoded, b"")))
    for hl in (2, 3, 5):
        n = vf.frame_len - 4 - (empty - 1) - hl
        if n <= len(head) or bstr_head_len(n) != hl:
            continue
        start = head[-1] + 1
        tail = bytes((start + i) & 0xFF for i in range(256))
        reps = (n - len(head)) // 256 + 1
        payload = head + (tail * reps)[: n - len(head)]
        if checksum(payload) != vf.decoded.get("16"):
            continue
        frame = decoded_to_frame(vf.decoded, payload)
        body = encode_body(frame)
        raw = len(body).to_bytes(4, "big") + body
        if hashlib.sha256(raw).hexdigest() == vf.sha256:
            return raw
    return None


def direction_streams(path: Path) -> dict[str, list[VectorFrame]]:
    """The frames of one file grouped by direction, in wire order, only those whose bytes
    are known."""
    out: dict[str, list[VectorFrame]] = {}
    for vf in load(path):
        if vf.raw is not None:
            out.setdefault(vf.dir, []).append(vf)
    return out


def cbor_item(payload: bytes) -> Any:
    """``payload`` decoded as one CBOR item, or MISSING when it is not exactly one."""
    try:
        import io

        fp = io.BytesIO(payload)
        value = cbor2.CBORDecoder(fp).decode()
        if fp.tell() != len(payload):
            return MISSING
        return value
    except Exception:
        return MISSING
