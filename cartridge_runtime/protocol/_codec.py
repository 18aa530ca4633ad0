"""Encode frames to bytes and decode bytes to frames (FRM-*).

Encoding reproduces the reference byte for byte: keys in ascending order, absent keys left
out, shortest integers, 8-byte floats, definite lengths, meta maps in the order given.
Large payloads are copied exactly once, into the output buffer.

Decoding wraps every foreign failure (cbor2, Unicode, type) into :class:`FrameDecodeError`;
nothing else escapes.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from typing import Any

import cbor2

from ._constants import HARD_FRAME_CAP, PREFIX_LEN, FrameType, Key
from ._errors import FrameDecodeError, FrameEncodeError, FrameTooLargeError
from ._frame import Frame, MessageId
from ._validate import validate_frame

_pack_len = struct.Struct(">I").pack
_unpack_len = struct.Struct(">I").unpack_from

#: Payloads at least this large take the copy-once path instead of one cbor2 call.
_BIG_PAYLOAD = 4096

_FRAME_TYPES = {int(t): t for t in FrameType}
_INT_KEYS = {int}
_CBORDecoder = cbor2.CBORDecoder

# (attribute, key) in wire order, after the always-written keys 0..3.
_OPTIONAL_FIELDS: tuple[tuple[str, int], ...] = (
    ("content_type", Key.CONTENT_TYPE),
    ("meta", Key.META),
    ("payload", Key.PAYLOAD),
    ("len", Key.LEN),
    ("offset", Key.OFFSET),
    ("eof", Key.EOF),
    ("cap", Key.CAP),
    ("stream_id", Key.STREAM_ID),
    ("media_urn", Key.MEDIA_URN),
    ("routing_id", Key.ROUTING_ID),
    ("chunk_index", Key.CHUNK_INDEX),
    ("chunk_count", Key.CHUNK_COUNT),
    ("checksum", Key.CHECKSUM),
    ("is_sequence", Key.IS_SEQUENCE),
    ("force_kill", Key.FORCE_KILL),
    ("credit", Key.CREDIT),
    ("unbounded", Key.UNBOUNDED),
    ("output", Key.OUTPUT),
)


def _bstr_head(n: int) -> bytes:
    if n < 24:
        return bytes((0x40 | n,))
    if n < 0x100:
        return bytes((0x58, n))
    if n < 0x10000:
        return b"\x59" + n.to_bytes(2, "big")
    if n < 0x100000000:
        return b"\x5a" + n.to_bytes(4, "big")
    return b"\x5b" + n.to_bytes(8, "big")


def frame_to_map(frame: Frame) -> dict[int, Any]:
    """The CBOR map of a frame (integer keys, wire order), without the prefix."""
    m: dict[int, Any] = {
        0: frame.version,
        1: int(frame.frame_type),
        2: frame.id.value,
        3: frame.seq,
    }
    for attr, key in _OPTIONAL_FIELDS:
        v = getattr(frame, attr)
        if v is not None:
            if key == Key.ROUTING_ID:
                v = v.value
            m[key] = v
    return m


def encode_body(frame: Frame) -> bytes:
    """The CBOR body of a frame, without the length prefix."""
    m = frame_to_map(frame)
    try:
        payload = frame.payload
        if payload is None or len(payload) < _BIG_PAYLOAD:
            return cbor2.dumps(m)
        # Copy-once path: encode the map around the payload, then join the pieces.
        del m[Key.PAYLOAD]
        before = {k: v for k, v in m.items() if k < Key.PAYLOAD}
        after = {k: v for k, v in m.items() if k > Key.PAYLOAD}
        n = len(m) + 1
        parts = [
            bytes((0xA0 | n,)),
            cbor2.dumps(before)[1:],
            b"\x06",
            _bstr_head(len(payload)),
            payload,
        ]
        if after:
            parts.append(cbor2.dumps(after)[1:])
        return b"".join(parts)
    except (TypeError, ValueError, cbor2.CBOREncodeError) as exc:
        raise FrameEncodeError(f"cannot encode {frame.frame_type.name} frame: {exc}") from exc


def encode_frame(frame: Frame, max_frame: int = HARD_FRAME_CAP) -> bytes:
    """The complete wire form of ``frame``: 4-byte big-endian length, then the CBOR body.

    :raises FrameEncodeError: the body would exceed ``max_frame`` (or the hard cap).
    """
    body = encode_body(frame)
    n = len(body)
    if n > max_frame or n > HARD_FRAME_CAP:
        raise FrameEncodeError(
            f"{frame.frame_type.name} frame body of {n} bytes exceeds max_frame {min(max_frame, HARD_FRAME_CAP)}"
        )
    if n >= _BIG_PAYLOAD:
        return b"".join((_pack_len(n), body))
    return _pack_len(n) + body


def _id(value: Any, what: str) -> MessageId:
    if type(value) is bytes:
        if len(value) != 16:
            raise FrameDecodeError(f"{what} byte string must be 16 bytes, got {len(value)}")
        return MessageId(value)
    if type(value) is int:
        if value < 0:
            raise FrameDecodeError(f"{what} must be a UUID or an unsigned integer, got {value}")
        return MessageId(value)
    raise FrameDecodeError(f"{what} must be a 16-byte UUID or an unsigned integer, got {type(value).__name__}")


def _field(m: Mapping[Any, Any], key: int, kind: type | tuple[type, ...], name: str) -> Any:
    v = m.get(key)
    if v is None:
        return None
    if kind is int:
        if type(v) is not int or v < 0:
            raise FrameDecodeError(f"key {key} ({name}) must be an unsigned integer, got {v!r}")
        return v
    if kind is bool:
        if type(v) is not bool:
            raise FrameDecodeError(f"key {key} ({name}) must be a boolean, got {v!r}")
        return v
    if not isinstance(v, kind):
        raise FrameDecodeError(f"key {key} ({name}) has type {type(v).__name__}")
    return v


def map_to_frame(m: Any) -> Frame:
    """Build and validate a :class:`Frame` from a decoded CBOR map.

    :raises FrameDecodeError: a required key is missing or a value is malformed.
    """
    if not isinstance(m, dict):
        raise FrameDecodeError(f"frame body must be a CBOR map, got {type(m).__name__}")
    if set(map(type, m)) != _INT_KEYS:
        # Keys that are not integers are ignored (FRM-4). Filter them out first: 1.0 and True
        # hash and compare equal to 1, so a plain lookup would read them as key 1.
        m = {k: v for k, v in m.items() if type(k) is int}
    version = m.get(0)
    if version is None:
        raise FrameDecodeError("frame has no version (key 0)")
    if type(version) is not int:
        raise FrameDecodeError(f"frame version must be an integer, got {version!r}")
    ft = m.get(1)
    if type(ft) is not int:
        raise FrameDecodeError("frame has no integer frame type (key 1)" if ft is None else f"frame type must be an integer, got {ft!r}")
    frame_type = _FRAME_TYPES.get(ft)
    if frame_type is None:
        raise FrameDecodeError(f"unknown or retired frame type {ft}")
    if 2 not in m:
        raise FrameDecodeError("frame has no id (key 2)")
    fid = _id(m[2], "id")
    seq = m.get(3, 0)
    if type(seq) is not int or seq < 0:
        raise FrameDecodeError(f"seq must be an unsigned integer, got {seq!r}")
    xid_raw = m.get(13)
    meta = m.get(5)
    if meta is not None:
        if not isinstance(meta, dict) or not all(type(k) is str for k in meta):
            raise FrameDecodeError("meta (key 5) must be a map with text keys")
    payload = m.get(6)
    if payload is not None and type(payload) is not bytes:
        raise FrameDecodeError(f"payload (key 6) must be a byte string, got {type(payload).__name__}")
    output = m.get(21)
    if output is not None:
        if type(output) is not str:
            raise FrameDecodeError("output (key 21) must be text")
        if frame_type is not FrameType.STREAM_START:
            raise FrameDecodeError(f"output (key 21) is only allowed on STREAM_START, not {frame_type.name}")
    checksum = m.get(16)
    if checksum is not None and (type(checksum) is not int or not 0 <= checksum < 1 << 64):
        raise FrameDecodeError(f"checksum (key 16) must be a uint64, got {checksum!r}")
    frame = Frame(
        frame_type=frame_type,
        id=fid,
        seq=seq,
        version=version,
        content_type=_field(m, 4, str, "content_type"),
        meta=meta,
        payload=payload,
        len=_field(m, 7, int, "len"),
        offset=_field(m, 8, int, "offset"),
        eof=_field(m, 9, bool, "eof"),
        cap=_field(m, 10, str, "cap"),
        stream_id=_field(m, 11, str, "stream_id"),
        media_urn=_field(m, 12, str, "media_urn"),
        routing_id=None if xid_raw is None else _id(xid_raw, "routing id"),
        chunk_index=_field(m, 14, int, "chunk_index"),
        chunk_count=_field(m, 15, int, "chunk_count"),
        checksum=checksum,
        is_sequence=_field(m, 17, bool, "is_sequence"),
        force_kill=_field(m, 18, bool, "force_kill"),
        credit=_field(m, 19, int, "credit"),
        unbounded=_field(m, 20, bool, "unbounded"),
        output=output,
    )
    validate_frame(frame)
    return frame


def decode_body(body: bytes | bytearray | memoryview) -> Frame:
    """Decode one frame body (no length prefix).

    :raises FrameDecodeError: anything is wrong with it.
    """
    try:
        fp = io.BytesIO(body)
        m = _CBORDecoder(fp).decode()
        end = fp.tell()
    except Exception as exc:  # anything cbor2 raises on hostile input is a decode error
        raise FrameDecodeError(f"frame body is not valid CBOR: {exc}") from exc
    if end != len(body):
        # The body must be exactly one map; cbor2.loads would silently ignore the rest.
        raise FrameDecodeError(f"{len(body) - end} bytes of trailing data after the frame map")
    return map_to_frame(m)


def decode_frame(data: bytes | bytearray | memoryview, max_frame: int = HARD_FRAME_CAP) -> Frame:
    """Decode exactly one complete frame, length prefix included.

    :raises FrameTooLargeError: the prefix exceeds ``max_frame`` or the hard cap.
    :raises FrameDecodeError: the length does not match or the body is malformed.
    """
    if len(data) < PREFIX_LEN:
        raise FrameDecodeError(f"frame shorter than its {PREFIX_LEN}-byte length prefix")
    (n,) = _unpack_len(data, 0)
    limit = min(max_frame, HARD_FRAME_CAP)
    if n > limit:
        raise FrameTooLargeError(f"frame length {n} exceeds max_frame {limit}")
    if len(data) != PREFIX_LEN + n:
        raise FrameDecodeError(f"frame length prefix says {n} bytes but {len(data) - PREFIX_LEN} follow")
    return decode_body(memoryview(data)[PREFIX_LEN:])
