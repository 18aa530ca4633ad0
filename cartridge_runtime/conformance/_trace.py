"""Decoding raw byte captures (one file per direction, as ``cartridge tee`` writes them)
into a readable listing or into JSON lines in the format of ``protocol_spec/vectors/frames``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import cbor2

from ..protocol import (
    HARD_FRAME_CAP,
    IDENTITY_CAP,
    PREFIX_LEN,
    Frame,
    FrameType,
    ProtocolError,
    decode_body,
)

__all__ = (
    "H2C",
    "C2H",
    "CaptureFrame",
    "INDEX_NAME",
    "capture_names",
    "read_capture",
    "merge_directions",
    "vector_line",
    "listing_line",
)

H2C = "host->cartridge"
C2H = "cartridge->host"
#: Files ``cartridge tee`` writes into its --out directory.
INDEX_NAME = "index.jsonl"
FILE_NAMES = {H2C: "host-to-cartridge.bin", C2H: "cartridge-to-host.bin"}

#: Meta values that hold JSON in a byte string; the vectors show them parsed.
JSON_META = frozenset({"manifest", "pools", "desired_capacities"})
CUT_OVER = 1024  #: payloads longer than this are cut to 64 bytes of hex plus "..."
BIG_FRAME = 65536  #: frames this size or more keep only their first 256 bytes of hex


def capture_names(out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """The capture file of each direction inside a tee directory."""
    return {d: Path(out_dir) / name for d, name in FILE_NAMES.items()}


@attrs.frozen(kw_only=True)
class CaptureFrame:
    """One frame cut out of a capture: its bytes, where it ends, and its decoding."""

    dir: str
    raw: bytes  #: prefix included
    end: int  #: byte offset just past the frame in its direction's capture
    frame: Frame | None
    error: str | None = None


def read_capture(data: bytes, direction: str) -> Iterator[CaptureFrame]:
    """Split a byte capture into frames; a bad frame is yielded with ``error`` set, and a
    trailing partial frame as a last item with ``frame`` None."""
    pos = 0
    n = len(data)
    while pos + PREFIX_LEN <= n:
        size = int.from_bytes(data[pos : pos + PREFIX_LEN], "big")
        if size > HARD_FRAME_CAP or pos + PREFIX_LEN + size > n:
            break
        raw = data[pos : pos + PREFIX_LEN + size]
        pos += PREFIX_LEN + size
        try:
            frame: Frame | None = decode_body(raw[PREFIX_LEN:])
            error = None
        except ProtocolError as exc:
            frame, error = None, str(exc)
        yield CaptureFrame(dir=direction, raw=raw, end=pos, frame=frame, error=error)
    if pos < n:
        yield CaptureFrame(
            dir=direction,
            raw=data[pos:],
            end=n,
            frame=None,
            error=f"{n - pos} trailing bytes (incomplete frame)",
        )


def merge_directions(
    h2c: list[CaptureFrame], c2h: list[CaptureFrame], index: list[dict[str, Any]] | None
) -> list[CaptureFrame]:
    """Interleave two directions in the order each frame was fully received, using the
    tee's index (``{"dir", "t", "end"}`` per read); without one, host frames come first."""
    if not index:
        return [*h2c, *c2h]
    ends: dict[str, list[tuple[int, float]]] = {H2C: [], C2H: []}
    for entry in index:
        ends.setdefault(entry["dir"], []).append((int(entry["end"]), float(entry["t"])))

    def when(f: CaptureFrame) -> float:
        for end, t in ends.get(f.dir, []):
            if end >= f.end:
                return t
        return float("inf")

    tagged = [(when(f), 0 if f.dir == H2C else 1, i, f) for i, f in enumerate([*h2c, *c2h])]
    tagged.sort(key=lambda x: (x[0], x[1], x[2]))
    return [t[3] for t in tagged]


def _hex_or_cut(b: bytes) -> str:
    return b[:64].hex() + "..." if len(b) > CUT_OVER else b.hex()


def _json_value(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, cbor2.CBORTag):
        return {"tag": v.tag, "value": _json_value(v.value)}
    return v


def _decoded(m: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in m.items():
        key = str(k)
        if k == 5 and isinstance(v, dict):
            meta = {}
            for mk, mv in v.items():
                if mk in JSON_META and isinstance(mv, (bytes, bytearray)):
                    try:
                        meta[str(mk)] = json.loads(bytes(mv))
                        continue
                    except ValueError:
                        pass
                meta[str(mk)] = _json_value(mv)
            out[key] = meta
        elif k == 6 and isinstance(v, (bytes, bytearray)):
            out[key] = _hex_or_cut(bytes(v))
        else:
            out[key] = _json_value(v)
    return out


def _one_item(payload: bytes) -> tuple[bool, Any]:
    fp = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(fp).decode()
    except Exception:
        return False, None
    return fp.tell() == len(payload), value


def _phase(f: CaptureFrame, state: dict[str, Any]) -> str:
    """ "setup" for the HELLO pair, the host's identity request (no routing id) with its echo,
    and the POLICY right after; "scenario" for everything else."""
    fr = f.frame
    if fr is None or state.get("done"):
        return "scenario"
    ft = fr.frame_type
    if ft is FrameType.HELLO and state.get("hellos", 0) < 2:
        state["hellos"] = state.get("hellos", 0) + 1
        return "setup"
    if (
        ft is FrameType.REQ
        and fr.cap == IDENTITY_CAP
        and fr.routing_id is None
        and "rid" not in state
    ):
        state["rid"] = fr.id
        return "setup"
    if "rid" in state and fr.id == state["rid"]:
        if f.dir == C2H and ft in (FrameType.END, FrameType.ERR):
            state["echoed"] = True
        return "setup"
    if ft is FrameType.POLICY and state.get("echoed"):
        state["done"] = True
        return "setup"
    if state.get("echoed"):
        state["done"] = True  # the POLICY must come right after the echo
    return "scenario"


def vector_line(f: CaptureFrame, phase_state: dict[str, Any]) -> dict[str, Any]:
    """One JSON-lines record in the vectors' format (``dir``, ``type``, ``phase``,
    ``frame_len``, ``hex`` [+ ``hex_truncated``, ``sha256``], ``decoded``, ``payload_cbor``)."""
    rec: dict[str, Any] = {"dir": f.dir}
    fr = f.frame
    rec["type"] = fr.frame_type.name if fr is not None else "INVALID"
    rec["phase"] = _phase(f, phase_state)
    rec["frame_len"] = len(f.raw)
    if len(f.raw) >= BIG_FRAME:
        rec["hex"] = f.raw[:256].hex()
        rec["hex_truncated"] = True
        rec["sha256"] = hashlib.sha256(f.raw).hexdigest()
    else:
        rec["hex"] = f.raw.hex()
    try:
        m = cbor2.loads(f.raw[PREFIX_LEN:])
        rec["decoded"] = _decoded(m) if isinstance(m, dict) else _json_value(m)
    except Exception as exc:
        rec["error"] = f"not CBOR: {exc}"
    if f.error:
        rec["error"] = f.error
    if fr is not None and fr.frame_type is FrameType.CHUNK and fr.payload:
        whole, value = _one_item(fr.payload)
        if whole:
            rec["payload_cbor"] = (
                _hex_or_cut(value) if isinstance(value, bytes) else _json_value(value)
            )
    return rec


def listing_line(n: int, f: CaptureFrame) -> str:
    """One human-readable line: number, direction, and the frame's fields."""
    arrow = "H→C" if f.dir == H2C else "C→H"
    if f.frame is None:
        return f"{n:5}  {arrow}  !! {f.error} ({len(f.raw)} bytes)"
    fr = f.frame
    parts = [f"{fr.frame_type.name:<13}", f"id={fr.id}", f"seq={fr.seq}"]
    if fr.routing_id is not None:
        parts.append(f"xid={fr.routing_id}")
    for name in (
        "cap",
        "stream_id",
        "media_urn",
        "chunk_index",
        "chunk_count",
        "credit",
        "is_sequence",
        "unbounded",
        "output",
        "force_kill",
    ):
        v = getattr(fr, name)
        if v is not None:
            parts.append(f"{name}={v!r}")
    if fr.payload:
        whole, value = _one_item(fr.payload)
        shown = repr(value) if whole else f"raw {fr.payload[:24].hex()}"
        parts.append(f"payload[{len(fr.payload)}]={shown[:80]}")
    if fr.meta:
        meta = {
            k: (f"<{len(v)} bytes>" if isinstance(v, (bytes, bytearray)) and len(v) > 48 else v)
            for k, v in fr.meta.items()
        }
        parts.append(f"meta={meta!r}"[:300])
    if f.error:
        parts.append(f"!! {f.error}")
    return f"{n:5}  {arrow}  " + " ".join(parts)
