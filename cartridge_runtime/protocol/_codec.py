"""Encode frames to bytes and decode bytes to frames (FRM-*).

Encoding reproduces the reference byte for byte: keys in ascending order, absent keys left
out, shortest integers, 8-byte floats, definite lengths, meta maps in the order given.
Large payloads are copied exactly once, into the output buffer.

Decoding wraps every foreign failure (cbor2, Unicode, type) into :class:`FrameDecodeError`;
nothing else escapes.
"""

from __future__ import annotations

import io
import operator
import struct
from typing import Any

import attrs
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
_CBORDecoder = cbor2.CBORDecoder
_cbor_load = cbor2.load

# Frame's attrs fields in declaration order. Keys 4..21 of the key table sit at the same index
# as their key; 0..3 hold frame_type, id, seq, version. The hot paths below rely on this.
_FIELD_NAMES: tuple[str, ...] = tuple(a.name for a in attrs.fields(Frame))
assert _FIELD_NAMES[:4] == ("frame_type", "id", "seq", "version")
assert all(_FIELD_NAMES[int(k)] == k.name.lower() for k in Key if k >= Key.CONTENT_TYPE)
# Decoding builds frames straight through the slot descriptors (measured ~20% cheaper than
# attrs' generated keyword __init__ for the 22 frozen fields), from a list filled in one pass.
# That is only equivalent while Frame has no validators, converters or post-init hook.
assert all(a.validator is None and a.converter is None for a in attrs.fields(Frame))
assert not hasattr(Frame, "__attrs_post_init__")
_SETTERS = tuple(Frame.__dict__[name].__set__ for name in _FIELD_NAMES)
_all_fields = operator.attrgetter(*_FIELD_NAMES)
_new_frame = object.__new__
_OPTIONAL_KEYS: tuple[int, ...] = tuple(range(Key.CONTENT_TYPE, Key.OUTPUT + 1))
_FT_INT = {t: int(t) for t in FrameType}
_NONE18 = (None,) * 18
_ABSENT: Any = object()
#: Key 0..3 -> index in Frame field order (frame_type, id, seq, version).
_HEAD_SLOT = (3, 0, 1, 2)
_STR_TYPE = frozenset({str})

#: Expected Python type of each plainly typed optional key (decode checks, wire order).
_TEXT_KEYS = {4: "content_type", 10: "cap", 11: "stream_id", 12: "media_urn"}
_UINT_KEYS = {7: "len", 8: "offset", 14: "chunk_index", 15: "chunk_count", 19: "credit"}
_BOOL_KEYS = {9: "eof", 17: "is_sequence", 18: "force_kill", 20: "unbounded"}


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
    # One C call reads every slot; keys 4..21 sit at the same index in the tuple (hot path).
    vals = _all_fields(frame)
    m: dict[int, Any] = {0: vals[3], 1: _FT_INT[vals[0]], 2: vals[1].value, 3: vals[2]}
    for key in _OPTIONAL_KEYS:
        v = vals[key]
        if v is not None:
            m[key] = v.value if key == 13 else v  # 13: the routing id's CBOR form
    return m


def _encode_parts(frame: Frame) -> tuple[bytes, ...]:
    """The CBOR body as pieces whose concatenation is the body; a large payload is its own
    piece, so the caller copies it once, straight into the output."""
    m = frame_to_map(frame)
    try:
        payload = frame.payload
        if payload is None or len(payload) < _BIG_PAYLOAD:
            return (cbor2.dumps(m),)
        # Copy-once path: encode the map around the payload.
        del m[Key.PAYLOAD]
        before = {k: v for k, v in m.items() if k < Key.PAYLOAD}
        after = {k: v for k, v in m.items() if k > Key.PAYLOAD}
        n = len(m) + 1
        head = b"".join(
            (bytes((0xA0 | n,)), cbor2.dumps(before)[1:], b"\x06", _bstr_head(len(payload)))
        )
        if after:
            return (head, payload, cbor2.dumps(after)[1:])
        return (head, payload)
    except (TypeError, ValueError, cbor2.CBOREncodeError) as exc:
        raise FrameEncodeError(f"cannot encode {frame.frame_type.name} frame: {exc}") from exc


def encode_body(frame: Frame) -> bytes:
    """The CBOR body of a frame, without the length prefix."""
    parts = _encode_parts(frame)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def encode_frame(frame: Frame, max_frame: int = HARD_FRAME_CAP) -> bytes:
    """The complete wire form of ``frame``: 4-byte big-endian length, then the CBOR body.

    :raises FrameEncodeError: the body would exceed ``max_frame`` (or the hard cap).
    """
    parts = _encode_parts(frame)
    n = sum(map(len, parts)) if len(parts) > 1 else len(parts[0])
    if n > max_frame or n > HARD_FRAME_CAP:
        raise FrameEncodeError(
            f"{frame.frame_type.name} frame body of {n} bytes exceeds max_frame {min(max_frame, HARD_FRAME_CAP)}"
        )
    if len(parts) == 1:
        return _pack_len(n) + parts[0]
    return b"".join((_pack_len(n), *parts))


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


def map_to_frame(m: Any, *, validate: bool = True) -> Frame:
    """Build and validate a :class:`Frame` from a decoded CBOR map.

    ``validate=False`` skips the per-type meta checks (``validate_frame``) so that a
    conformance audit can read a frame with bad meta and name the exact rule it breaks.

    :raises FrameDecodeError: a required key is missing or a value is malformed.
    """
    if not isinstance(m, dict):
        raise FrameDecodeError(f"frame body must be a CBOR map, got {type(m).__name__}")
    # One pass over the keys present. Slot values go in Frame field order: keys 4..21 land at
    # their own index; 0..3 hold the raw frame type, id, seq and version, checked below.
    vals: list[Any] = [_ABSENT, _ABSENT, 0, _ABSENT, *_NONE18]
    for key, v in m.items():
        if type(key) is not int or not 0 <= key <= 21:
            # Unknown integer keys and non-integer keys are ignored (FRM-4). The exact type
            # test matters: 1.0 and True compare equal to 1 but are not key 1.
            continue
        if key < 4:
            vals[_HEAD_SLOT[key]] = v
            continue
        if v is None:
            continue  # CBOR null reads as absent
        if key in _TEXT_KEYS:
            if type(v) is not str:
                raise FrameDecodeError(f"key {key} ({_TEXT_KEYS[key]}) has type {type(v).__name__}")
        elif key in _UINT_KEYS:
            if type(v) is not int or v < 0:
                raise FrameDecodeError(
                    f"key {key} ({_UINT_KEYS[key]}) must be an unsigned integer, got {v!r}"
                )
        elif key in _BOOL_KEYS:
            if type(v) is not bool:
                raise FrameDecodeError(
                    f"key {key} ({_BOOL_KEYS[key]}) must be a boolean, got {v!r}"
                )
        elif key == 5:
            if type(v) is not dict or not _STR_TYPE.issuperset(map(type, v)):
                raise FrameDecodeError("meta (key 5) must be a map with text keys")
        elif key == 6:
            if type(v) is not bytes:
                raise FrameDecodeError(
                    f"payload (key 6) must be a byte string, got {type(v).__name__}"
                )
        elif key == 13:
            v = _id(v, "routing id")
        elif key == 16:
            if type(v) is not int or not 0 <= v < 1 << 64:
                raise FrameDecodeError(f"checksum (key 16) must be a uint64, got {v!r}")
        elif key == 21 and type(v) is not str:
            raise FrameDecodeError("output (key 21) must be text")
        vals[key] = v
    ft, fid, seq, version = vals[0], vals[1], vals[2], vals[3]
    if version is _ABSENT or version is None:
        raise FrameDecodeError("frame has no version (key 0)")
    if type(version) is not int:
        raise FrameDecodeError(f"frame version must be an integer, got {version!r}")
    if type(ft) is not int:
        raise FrameDecodeError(
            "frame has no integer frame type (key 1)"
            if ft is _ABSENT or ft is None
            else f"frame type must be an integer, got {ft!r}"
        )
    frame_type = _FRAME_TYPES.get(ft)
    if frame_type is None:
        raise FrameDecodeError(f"unknown or retired frame type {ft}")
    if fid is _ABSENT:
        raise FrameDecodeError("frame has no id (key 2)")
    if type(seq) is not int or seq < 0:
        raise FrameDecodeError(f"seq must be an unsigned integer, got {seq!r}")
    if vals[21] is not None and frame_type is not FrameType.STREAM_START:
        raise FrameDecodeError(
            f"output (key 21) is only allowed on STREAM_START, not {frame_type.name}"
        )
    vals[0] = frame_type
    vals[1] = _id(fid, "id")
    frame: Frame = _new_frame(Frame)
    for setter, v in zip(_SETTERS, vals, strict=True):
        setter(frame, v)
    if validate:
        validate_frame(frame)
    return frame


def decode_range(
    data: bytes | bytearray | memoryview, start: int, stop: int | None = None
) -> Frame:
    """Decode the frame body that fills ``data[start:stop]`` (``stop`` defaults to the end).

    A ``bytes`` input is read in place (``BytesIO`` shares a bytes object instead of copying
    it), so a large frame's body is copied only once, into its payload.
    """
    try:
        fp = io.BytesIO(data)
        if start:
            fp.seek(start)
        # From offset 0, read the whole body at once: BytesIO hands back its buffer without a
        # copy, and cbor2 then slices the payload out of it (2x faster than 4 KiB reads for a
        # 256 KiB payload). From an offset, a whole read would copy the body once more, so keep
        # cbor2's small reads there. tell() is exact either way.
        if not start and stop is None and len(data) > _BIG_PAYLOAD:
            m = _CBORDecoder(fp, read_size=len(data)).decode()
        else:
            m = _cbor_load(fp)  # no keyword arguments: ~0.3 µs cheaper per small frame
        end = fp.tell()
    except Exception as exc:  # anything cbor2 raises on hostile input is a decode error
        raise FrameDecodeError(f"frame body is not valid CBOR: {exc}") from exc
    if stop is None:
        stop = len(data)
    if end != stop:
        if end > stop:  # the map ran on past the length prefix (into the next frame)
            raise FrameDecodeError(
                f"frame body is truncated: its map runs {end - stop} bytes past the frame"
            )
        # The body must be exactly one map; cbor2.loads would silently ignore the rest.
        raise FrameDecodeError(f"{stop - end} bytes of trailing data after the frame map")
    return map_to_frame(m)


def decode_body(body: bytes | bytearray | memoryview) -> Frame:
    """Decode one frame body (no length prefix).

    :raises FrameDecodeError: anything is wrong with it.
    """
    return decode_range(body, 0)


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
    if type(data) is bytes:
        return decode_range(data, PREFIX_LEN)
    return decode_range(memoryview(data)[PREFIX_LEN:], 0)
