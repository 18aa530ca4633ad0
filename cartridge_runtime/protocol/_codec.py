"""Encode frames to bytes and decode bytes to frames (FRM-*).

Encoding reproduces the reference byte for byte: keys in ascending order, absent keys left
out, shortest integers, 8-byte floats, definite lengths, meta maps in the order given.
Large payloads are copied exactly once, into the output buffer.

Decoding wraps every foreign failure (cbor2, Unicode, type) into :class:`FrameDecodeError`;
nothing else escapes.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Sequence
from typing import Any

import attrs
import cbor2

from .._redact import describe
from ._constants import HARD_FRAME_CAP, PREFIX_LEN, PURE_PYTHON_ENV, FrameKey, FrameType
from ._errors import (
    FrameDecodeError,
    FrameEncodeError,
    FrameTooLargeError,
    FrameTooLargeToSendError,
)
from ._frame import _ID_CACHE, _ID_CACHE_MAX, WIRE_FIELD_NAMES, Frame, MessageId, _from_fields
from ._validate import PRESENCE_CHECKED as _REQUIRED_KEYS
from ._validate import TYPE_CHECKS as _TYPE_CHECKS

_pack_len = struct.Struct(">I").pack
_unpack_len = struct.Struct(">I").unpack_from

#: Payloads at least this large take the copy-once path instead of one cbor2 call.
_BIG_PAYLOAD = 4096

_FRAME_TYPES = {int(t): t for t in FrameType}
_FT_INT = {t: int(t) for t in FrameType}
_CBORDecoder = cbor2.CBORDecoder
_cbor_load = cbor2.load
_dumps = cbor2.dumps
_loads = cbor2.loads
#: Secret second item of the small-body decode wrapper (see decode_range): a 16-byte string.
_WRAP_SECRET = os.urandom(16)
_WRAP_TAIL = b"\x50" + _WRAP_SECRET

# A Frame's __dict__ holds its present fields in wire-key order (see _frame.Frame), so the
# hot paths translate names <-> key numbers with one dict lookup each and never visit absent
# keys. The name of key k is WIRE_FIELD_NAMES[k].
assert WIRE_FIELD_NAMES[:4] == ("version", "frame_type", "id", "seq")
assert all(
    WIRE_FIELD_NAMES[int(k)] == k.name.lower() for k in FrameKey if k >= FrameKey.CONTENT_TYPE
)
assert {a.name for a in attrs.fields(Frame)} == set(WIRE_FIELD_NAMES)
_KEY_OF: dict[str, int] = {name: k for k, name in enumerate(WIRE_FIELD_NAMES)}

#: FrameKey -> (field name, exact Python type a valid value has). ``_IDT`` marks the two id keys,
#: whose value (a 16-byte string or an unsigned integer) becomes a MessageId.
_IDT: Any = type("_IdSentinel", (), {})
_SPEC: dict[int, tuple[str, Any]] = {}
for _k, _name in enumerate(WIRE_FIELD_NAMES):
    _SPEC[_k] = (_name, int)
for _k in (
    FrameKey.CONTENT_TYPE,
    FrameKey.CAP,
    FrameKey.STREAM_ID,
    FrameKey.MEDIA_URN,
    FrameKey.OUTPUT,
):
    _SPEC[int(_k)] = (WIRE_FIELD_NAMES[_k], str)
for _k in (FrameKey.EOF, FrameKey.IS_SEQUENCE, FrameKey.FORCE_KILL, FrameKey.UNBOUNDED):
    _SPEC[int(_k)] = (WIRE_FIELD_NAMES[_k], bool)
_SPEC[int(FrameKey.META)] = ("meta", dict)
_SPEC[int(FrameKey.PAYLOAD)] = ("payload", bytes)
_SPEC[2] = ("id", _IDT)
_SPEC[int(FrameKey.ROUTING_ID)] = ("routing_id", _IDT)
del _k, _name
_STR_TYPE = frozenset({str})
_U64 = 1 << 64
_INT_TYPE = frozenset({int})


# Optional compiled fast paths (``_speedups.c``, built at install where a C compiler exists).
# They take the common valid case and answer None for anything else, so the Python code below
# stays the single definition of the rules and of every error message. ``None`` here: the
# extension is absent or switched off.
_c_map_to_frame: Any = None
_c_decode_direct: Any = None
_c_encode_small: Any = None
_c_take_frame: Any = None
_c_take_frames: Any = None
_c_scan_prefixes: Any = None
_c_encode_flow: Any = None


def _c_kind(key: int, typ: Any) -> int:
    """The value kind ``_speedups.c`` checks for a key (its ``K_*`` enum)."""
    if key == FrameKey.CHECKSUM:
        return 6
    return {int: 0, str: 1, bool: 2, dict: 3, bytes: 4, _IDT: 5}[typ]


def _load_speedups() -> bool:
    """Import and configure the compiled fast paths; False when absent or switched off."""
    global _c_map_to_frame, _c_decode_direct, _c_encode_small, _c_take_frame, _c_take_frames
    global _c_scan_prefixes, _c_encode_flow
    if os.environ.get(PURE_PYTHON_ENV):
        return False
    try:
        from ._speedups import (
            configure,
            decode_direct,
            encode_flow,
            encode_small,
            map_to_frame,
            scan_prefixes,
            take_frame,
            take_frames,
        )
    except ImportError:
        return False
    configure(
        spec={k: (name, _c_kind(k, typ)) for k, (name, typ) in _SPEC.items()},
        dumps=_dumps,
        frame_types=_FRAME_TYPES,
        frame_type_ints=_FT_INT,
        id_cache=_ID_CACHE,
        new_id=_new_id,
        frame_class=Frame,
        checks=_TYPE_CHECKS,
        required=_REQUIRED_KEYS,
        key_of=_KEY_OF,
        stream_start=FrameType.STREAM_START,
        hard_cap=HARD_FRAME_CAP,
        id_class=MessageId,
        id_cache_max=_ID_CACHE_MAX,
    )
    _c_map_to_frame = map_to_frame
    _c_decode_direct = decode_direct
    _c_encode_small = encode_small
    _c_take_frame = take_frame
    _c_take_frames = take_frames
    _c_scan_prefixes = scan_prefixes
    _c_encode_flow = encode_flow
    _compiled_new_id()
    return True


def _compiled_new_id() -> None:
    """Make ``MessageId.new`` and ``_frame.int_id`` the compiled ones: the same ids (random
    version 4 UUIDs; routing ids), shared through the id cache; the random bytes drawn from
    a pool of the OS's, forgotten at fork as the Python one's is."""
    from . import _frame
    from ._speedups import configure_ids, forget_ids, int_id, new_id

    configure_ids(os.urandom)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_ids)
    MessageId.new = new_id  # type: ignore[method-assign]
    _frame.int_id = int_id  # type: ignore[assignment]


def speedups_enabled() -> bool:
    """True when the compiled codec fast paths are in use."""
    return _c_map_to_frame is not None


def bytes_head(n: int) -> bytes:
    """The shortest CBOR byte-string head for ``n`` bytes (what the encoder writes)."""
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
    # The instance dict already holds exactly the present fields in wire order: rename its
    # keys, then give the frame type and the two ids their CBOR form.
    d = frame.__dict__
    m = {_KEY_OF[name]: v for name, v in d.items()}  # measured faster than dict(zip(map()))
    m[1] = _FT_INT[m[1]]  # a plain int: cbor2 encodes an IntEnum slower (same bytes)
    m[2] = m[2].value
    r = m.get(13)
    if r is not None:
        m[13] = r.value
    return m


def _encode_error(frame: Frame, exc: Exception) -> FrameEncodeError:
    return FrameEncodeError(f"cannot encode {frame.frame_type.name} frame: {exc}")


def _encode_parts(frame: Frame, seq: int | None = None) -> tuple[bytes, ...]:
    """The CBOR body as pieces whose concatenation is the body; a large payload is its own
    piece, so the caller copies it once, straight into the output. ``seq`` overrides the
    frame's seq (key 3, always present, so the key order is unchanged)."""
    m = frame_to_map(frame)
    if seq is not None:
        m[3] = seq
    try:
        payload = m.get(6)
        if payload is None or len(payload) < _BIG_PAYLOAD:
            return (_dumps(m),)
        # Copy-once path: encode the map around the payload.
        del m[FrameKey.PAYLOAD]
        before = {k: v for k, v in m.items() if k < FrameKey.PAYLOAD}
        after = {k: v for k, v in m.items() if k > FrameKey.PAYLOAD}
        n = len(m) + 1
        head = b"".join((bytes((0xA0 | n,)), _dumps(before)[1:], b"\x06", bytes_head(len(payload))))
        if after:
            return (head, payload, _dumps(after)[1:])
        return (head, payload)
    except (TypeError, ValueError, cbor2.CBOREncodeError) as exc:
        raise _encode_error(frame, exc) from exc


def encode_body(frame: Frame, seq: int | None = None) -> bytes:
    """The CBOR body of a frame, without the length prefix (``seq``: as for
    :func:`encode_frame`)."""
    parts = _encode_parts(frame, seq)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def encode_frame(frame: Frame, max_frame: int = HARD_FRAME_CAP, seq: int | None = None) -> bytes:
    """The complete wire form of ``frame``: 4-byte big-endian length, then the CBOR body.

    ``seq``, when given, is written instead of ``frame.seq``: the same bytes as encoding
    ``frame.replace(seq=seq)``, without building that copy (a writer numbering its frames
    with :meth:`SeqAssigner.number` passes it here).

    :raises FrameTooLargeToSendError: the body would exceed ``max_frame`` (or the hard cap);
        a :class:`FrameTooLargeError` and a :class:`FrameEncodeError`.
    :raises FrameEncodeError: a field cannot be encoded.
    """
    d = frame.__dict__
    if _c_encode_small is not None:
        try:
            wire = _c_encode_small(d, seq, max_frame)
        except (TypeError, ValueError, KeyError, AttributeError, cbor2.CBOREncodeError) as exc:
            raise _encode_error(frame, exc) from exc
        if wire is not None:
            return wire  # type: ignore[no-any-return]
    payload = d.get("payload")
    if payload is None or len(payload) < _BIG_PAYLOAD:
        # Small-frame fast path: frame_to_map inlined (saves a call), one cbor2 call, one
        # concatenation.
        m = {_KEY_OF[name]: v for name, v in d.items()}
        try:
            m[1] = _FT_INT[m[1]]
            m[2] = m[2].value
            r = m.get(13)
            if r is not None:
                m[13] = r.value
            if seq is not None:
                m[3] = seq
            body = _dumps(m)
        except (TypeError, ValueError, KeyError, AttributeError, cbor2.CBOREncodeError) as exc:
            raise _encode_error(frame, exc) from exc
        n = len(body)
        _check_body_size(frame, n, max_frame)
        return _pack_len(n) + body
    return b"".join(_large_frame_parts(frame, max_frame, seq))


def encode_flow(frames: Sequence[Frame], max_frame: int, out: list[Any]) -> int:
    """Append the wire form of ``frames``, frame ``i`` with seq ``i`` (a flow its sender opens
    and ends in one go, as a small call's request), to ``out`` while the compiled fast path
    takes them: small frames it encodes exactly as :func:`encode_frame` does. Return how many
    it took; the caller encodes the rest (and meets any error there). Without the fast path
    it takes none."""
    if _c_encode_flow is None:
        return 0
    n: int = _c_encode_flow(frames, max_frame, out)
    return n


def _check_body_size(frame: Frame, n: int, max_frame: int) -> None:
    if n > max_frame or n > HARD_FRAME_CAP:
        raise FrameTooLargeToSendError(
            f"{frame.frame_type.name} frame body of {n} bytes exceeds max_frame "
            f"{min(max_frame, HARD_FRAME_CAP)}"
        )


def _large_frame_parts(frame: Frame, max_frame: int, seq: int | None) -> tuple[bytes, ...]:
    """Prefix and map head, then the payload object itself, then any keys after it."""
    parts = _encode_parts(frame, seq)
    n = sum(map(len, parts))
    _check_body_size(frame, n, max_frame)
    return (_pack_len(n) + parts[0], *parts[1:])


def encode_frame_parts(
    frame: Frame, max_frame: int = HARD_FRAME_CAP, seq: int | None = None
) -> tuple[bytes, ...]:
    """The wire form of ``frame`` as buffers to write one after another (``writev``).

    A small frame is one buffer, as from :func:`encode_frame`. A large payload is a buffer
    of its own, the very object the frame holds, so a 256 KiB CHUNK reaches the kernel
    without being copied into a joined frame first.

    :raises FrameEncodeError: as :func:`encode_frame`.
    """
    payload = frame.__dict__.get("payload")
    if payload is None or len(payload) < _BIG_PAYLOAD:
        return (encode_frame(frame, max_frame, seq),)
    return _large_frame_parts(frame, max_frame, seq)


def _id(value: Any, what: str) -> MessageId:
    """The MessageId a decoded id value stands for.

    :raises FrameDecodeError: not a 16-byte string or an unsigned integer.
    """
    t = type(value)
    if t is bytes:
        if len(value) != 16:
            raise FrameDecodeError(f"{what} byte string must be 16 bytes, got {len(value)}")
    elif t is int:
        if value < 0:
            raise FrameDecodeError(f"{what} must be a UUID or an unsigned integer, got {value}")
    else:
        raise FrameDecodeError(
            f"{what} must be a 16-byte UUID or an unsigned integer, got {t.__name__}"
        )
    return MessageId(value)


def _bad_value(key: int, v: Any) -> Any:
    """Slow path of :func:`map_to_frame` for a value whose type is not the plain one: the
    ids (always here), or an error. Returns the value to store."""
    if key == 2:
        return _id(v, "id")
    if key == 13:
        return _id(v, "routing id")
    name, typ = _SPEC[key]
    if key == 5:
        raise FrameDecodeError("meta (key 5) must be a map with text keys")
    if key == 6:
        raise FrameDecodeError(f"payload (key 6) must be a byte string, got {type(v).__name__}")
    if typ is str:
        if key == 21:
            raise FrameDecodeError(f"output (key 21) must be text, got {describe(v)}")
        raise FrameDecodeError(f"key {key} ({name}) has type {type(v).__name__}")
    if typ is bool:
        raise FrameDecodeError(f"key {key} ({name}) must be a boolean, got {describe(v)}")
    if key == 0:
        if v is None:
            raise FrameDecodeError("frame has no version (key 0)")
        raise FrameDecodeError(f"frame version must be an integer, got {describe(v)}")
    if key == 1:
        if v is None:
            raise FrameDecodeError("frame has no integer frame type (key 1)")
        raise FrameDecodeError(f"frame type must be an integer, got {describe(v)}")
    if key == 3:
        raise FrameDecodeError(f"seq must be an unsigned integer, got {describe(v)}")
    if key == 16:
        raise FrameDecodeError(f"checksum (key 16) must be a uint64, got {describe(v)}")
    raise FrameDecodeError(f"key {key} ({name}) must be an unsigned integer, got {describe(v)}")


def _new_id(key: int, value: Any) -> MessageId:
    """Check a decoded id value not in ``_ID_CACHE`` and add its MessageId there.

    :raises FrameDecodeError: not a 16-byte string or an unsigned integer.
    """
    mid = _id(value, "id" if key == 2 else "routing id")
    if len(_ID_CACHE) >= _ID_CACHE_MAX:
        _ID_CACHE.clear()
    _ID_CACHE[value] = mid
    return mid


def map_to_frame(m: Any, *, validate: bool = True) -> Frame:
    """Build and validate a :class:`Frame` from a decoded CBOR map.

    ``validate=False`` skips the per-type meta checks (``validate_frame``) so that a
    conformance audit can read a frame with bad meta and name the exact rule it breaks.

    :raises FrameDecodeError: a required key is missing or a value is malformed.
    """
    if validate and _c_map_to_frame is not None:
        fast = _c_map_to_frame(m)
        if fast is not None:
            return fast  # type: ignore[no-any-return]
    if type(m) is not dict:
        raise FrameDecodeError(f"frame body must be a CBOR map, got {type(m).__name__}")
    if not _INT_TYPE.issuperset(map(type, m)):
        # Non-integer keys are ignored (FRM-4). The exact type test matters: 1.0 and True
        # compare equal to 1 but are not key 1. (One C-level pass; rare case filtered here.)
        m = {k: v for k, v in m.items() if type(k) is int}
    # One pass over the keys present, building the frame's __dict__ (field name -> value).
    d: dict[str, Any] = {}
    last = -1
    ordered = True
    for key, v in m.items():
        spec = _SPEC.get(key)
        if spec is None:
            continue  # unknown integer keys are ignored (FRM-4)
        name, typ = spec
        if type(v) is typ:  # the common case: the plain type, then its value checks
            if typ is int:
                # Keys 0 (version) and 1 (frame type, looked up below) take any integer.
                if (v < 0 and key > 1) or (key == 16 and v >= _U64):
                    _bad_value(key, v)
            elif typ is dict and not _STR_TYPE.issuperset(map(type, v)):
                _bad_value(5, v)
        elif typ is _IDT:  # keys 2 and 13: a shared MessageId (the cache holds valid ids only)
            tv = type(v)
            mid = _ID_CACHE.get(v) if tv is bytes or tv is int else None
            v = _new_id(key, v) if mid is None else mid
        elif v is None:
            if key > 3 and key != 21:
                continue  # CBOR null reads as absent (as the reference reads keys 11 and 12)
            _bad_value(key, v)  # ... but a null output name is malformed, as it refuses it
        else:
            _bad_value(key, v)
        if key < last:
            ordered = False
        last = key
        d[name] = v
    if "version" not in d:
        raise FrameDecodeError("frame has no version (key 0)")
    ft = d.get("frame_type")
    if ft is None:
        raise FrameDecodeError("frame has no integer frame type (key 1)")
    frame_type = _FRAME_TYPES.get(ft)
    if frame_type is None:
        raise FrameDecodeError(f"unknown or retired frame type {ft}")
    d["frame_type"] = frame_type
    if "id" not in d:
        raise FrameDecodeError("frame has no id (key 2)")
    if "output" in d and frame_type is not FrameType.STREAM_START:
        raise FrameDecodeError(
            f"output (key 21) is only allowed on STREAM_START, not {frame_type.name}"
        )
    if not ordered or "seq" not in d:
        # Out-of-order keys on the wire (or no seq, which defaults to 0): restore wire order,
        # which encoding relies on.
        d.setdefault("seq", 0)
        d = {n: d[n] for n in WIRE_FIELD_NAMES if n in d}
    frame = _from_fields(d)
    if validate:
        check = _TYPE_CHECKS.get(frame_type)  # validate_frame, inlined
        if check is not None:
            check(frame)
    return frame


def decode_range(
    data: bytes | bytearray | memoryview, start: int, stop: int | None = None
) -> Frame:
    """Decode the frame body that fills ``data[start:stop]`` (``stop`` defaults to the end).

    A ``bytes`` input is read in place (``BytesIO`` shares a bytes object instead of copying
    it), so a large frame's body is copied only once, into its payload.
    """
    if stop is None:
        stop = len(data)
    if _c_decode_direct is not None:
        # The compiled reader, at any size: it copies a large payload once, straight out of
        # ``data`` (bytes, bytearray or memoryview alike).
        fast = _c_decode_direct(data, start, stop)
        if fast is not None:
            return fast  # type: ignore[no-any-return]
    if stop - start < _BIG_PAYLOAD:
        # Fast path for small bodies: ``cbor2.loads`` is ~0.5 µs cheaper than decoding from a
        # BytesIO and asking tell(), but it ignores trailing bytes. So decode the body inside a
        # 2-array whose second item is a per-process secret: trailing data would be decoded as
        # that second item instead (or make it fail). Only a body that is exactly one item
        # followed by our secret yields [item, secret]; a peer cannot append the secret without
        # knowing it (odds 2**-128). Anything else, valid or not, takes the exact path below,
        # which also gives the precise error.
        try:
            pair = _loads(b"".join((b"\x82", data[start:stop], _WRAP_TAIL)))
        except Exception:
            pair = None
        if type(pair) is list and len(pair) == 2:
            tail = pair[1]
            if type(tail) is bytes and tail == _WRAP_SECRET:
                return map_to_frame(pair[0])
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
    size = len(data)
    if size < PREFIX_LEN:
        raise FrameDecodeError(f"frame shorter than its {PREFIX_LEN}-byte length prefix")
    (n,) = _unpack_len(data, 0)
    if n > max_frame or n > HARD_FRAME_CAP:
        limit = min(max_frame, HARD_FRAME_CAP)
        raise FrameTooLargeError(f"frame length {n} exceeds max_frame {limit}")
    if size != PREFIX_LEN + n:
        raise FrameDecodeError(
            f"frame length prefix says {n} bytes but {len(data) - PREFIX_LEN} follow"
        )
    if _c_decode_direct is not None:
        fast = _c_decode_direct(data, PREFIX_LEN, size)
        if fast is not None:
            return fast  # type: ignore[no-any-return]
    if n < _BIG_PAYLOAD:
        # decode_range's small-body fast path, inlined here (one call less per frame).
        try:
            pair = _loads(b"".join((b"\x82", data[PREFIX_LEN:], _WRAP_TAIL)))
        except Exception:
            pair = None
        if type(pair) is list and len(pair) == 2:
            tail = pair[1]
            if type(tail) is bytes and tail == _WRAP_SECRET:
                return map_to_frame(pair[0])
    if type(data) is bytes:
        return decode_range(data, PREFIX_LEN)
    return decode_range(memoryview(data)[PREFIX_LEN:], 0)


_load_speedups()
