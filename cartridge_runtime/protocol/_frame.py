"""The frame model: one immutable value per wire frame.

A :class:`Frame` holds exactly the fields of the key table (FRM-4); ``None`` means the key
is absent. Frames are built with the per-type constructors in ``_builders`` (or directly)
and turned into bytes by ``_codec``.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from .._redact import describe
from ._constants import PROTOCOL_VERSION, PURE_PYTHON_ENV, FrameType

#: Random bytes fetched from the OS at a time for new ids (one system call per 256 ids).
_RANDOM_BATCH = 16 * 256
_random_pool = memoryview(b"")


_random_lock = threading.Lock()  # threads must never take the same 16 bytes


def _random16() -> bytes:
    """16 bytes from the OS's random source, drawn from a batch fetched ahead."""
    global _random_pool
    with _random_lock:
        if len(_random_pool) < 16:
            _random_pool = memoryview(os.urandom(_RANDOM_BATCH))
        out = bytes(_random_pool[:16])
        _random_pool = _random_pool[16:]
    return out


def _forget_random_pool() -> None:
    # A forked child must not hand out the ids its parent will also hand out (and must not
    # inherit a lock some other thread of the parent held at the fork).
    global _random_pool, _random_lock
    _random_pool = memoryview(b"")
    _random_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_random_pool)


@attrs.frozen(slots=True, repr=False)
class MessageId:
    """A request or routing id: a 16-byte UUID or an unsigned integer (FRM-6).

    The two forms never compare equal, even when they would spell the same number.
    """

    value: bytes | int

    @classmethod
    def new(cls) -> MessageId:
        """A fresh random UUID id (version 4), the one the frames decoded for it will hold
        (see :func:`share_id`)."""
        b = bytearray(_random16())
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        return share_id(cls(bytes(b)))

    @property
    def is_uuid(self) -> bool:
        return isinstance(self.value, bytes)

    def __str__(self) -> str:
        if isinstance(self.value, bytes):
            return str(uuid.UUID(bytes=self.value))
        return str(self.value)

    def __repr__(self) -> str:
        return f"MessageId({self})"


def _compiled_id_hash() -> None:
    """Hash ids in C (``_speedups``): the same value, ``hash(id.value)``, without a Python call
    per dict lookup keyed by an id. Done before any id is made, so every id hashes one way."""
    if os.environ.get(PURE_PYTHON_ENV):
        return
    try:
        from ._speedups import id_hash_method
    except ImportError:
        return
    MessageId.__hash__ = id_hash_method()  # type: ignore[method-assign]


_compiled_id_hash()


#: Ids by value, shared by the decoder (``_codec``) and the ids handed out by :func:`share_id`:
#: a request's frames all carry the same rid/xid, so most lookups hit, and a response frame's
#: id is the very object its request was filed under (a dict lookup then compares no values).
#: Bounded (cleared when full) so a hostile peer cannot grow it.
_ID_CACHE: dict[bytes | int, MessageId] = {}
_ID_CACHE_MAX = 4096


def share_id(mid: MessageId) -> MessageId:
    """Make ``mid`` the object the decoder gives for frames carrying its value (while the
    bounded cache keeps it), and return it."""
    if len(_ID_CACHE) >= _ID_CACHE_MAX:
        _ID_CACHE.clear()
    _ID_CACHE[mid.value] = mid
    return mid


def int_id(n: int) -> MessageId:
    """``MessageId(n)`` for an unsigned integer ``n``, shared as :func:`share_id` does (a
    routing id the host hands out); compiled when the codec is (``_codec``)."""
    return share_id(MessageId(n))


#: The id every non-request frame of the handshake uses (HELLO, POLICY, RELAY_*).
ZERO_ID = MessageId(0)


@attrs.frozen(slots=False, kw_only=True, repr=False, init=False)
class Frame:
    """One Bifaci frame. Field names follow the key table; ``None`` = key absent.

    Storage (a speed measure): the instance ``__dict__`` holds the four head
    fields (version, frame_type, id, seq) and only the optional fields that are present, in
    wire-key order; an absent optional field reads as ``None`` from a class-level default.
    So building a frame touches only the keys it has, and encoding walks only those. The
    hand-written ``__init__`` keeps that invariant (``attrs.evolve`` and :meth:`replace` go
    through it); equality, hashing and ``attrs.fields`` are attrs' own and see all 22 fields.
    """

    frame_type: FrameType
    id: MessageId
    seq: int = 0
    version: int = PROTOCOL_VERSION
    content_type: str | None = None
    meta: Mapping[str, Any] | None = None
    payload: bytes | None = None
    len: int | None = None
    offset: int | None = None
    eof: bool | None = None
    cap: str | None = None
    stream_id: str | None = None
    media_urn: str | None = None
    routing_id: MessageId | None = None
    chunk_index: int | None = None
    chunk_count: int | None = None
    checksum: int | None = None
    is_sequence: bool | None = None
    force_kill: bool | None = None
    credit: int | None = None
    unbounded: bool | None = None
    output: str | None = None

    def __init__(
        self,
        *,
        frame_type: FrameType,
        id: MessageId,
        seq: int = 0,
        version: int = PROTOCOL_VERSION,
        content_type: str | None = None,
        meta: Mapping[str, Any] | None = None,
        payload: bytes | None = None,
        len: int | None = None,
        offset: int | None = None,
        eof: bool | None = None,
        cap: str | None = None,
        stream_id: str | None = None,
        media_urn: str | None = None,
        routing_id: MessageId | None = None,
        chunk_index: int | None = None,
        chunk_count: int | None = None,
        checksum: int | None = None,
        is_sequence: bool | None = None,
        force_kill: bool | None = None,
        credit: int | None = None,
        unbounded: bool | None = None,
        output: str | None = None,
    ) -> None:
        # Wire-key order (0 version, 1 frame_type, 2 id, 3 seq, then 4..21); absent = left out.
        d = self.__dict__
        d["version"] = version
        d["frame_type"] = frame_type
        d["id"] = id
        d["seq"] = seq
        if content_type is not None:
            d["content_type"] = content_type
        if meta is not None:
            d["meta"] = meta
        if payload is not None:
            d["payload"] = payload
        if len is not None:
            d["len"] = len
        if offset is not None:
            d["offset"] = offset
        if eof is not None:
            d["eof"] = eof
        if cap is not None:
            d["cap"] = cap
        if stream_id is not None:
            d["stream_id"] = stream_id
        if media_urn is not None:
            d["media_urn"] = media_urn
        if routing_id is not None:
            d["routing_id"] = routing_id
        if chunk_index is not None:
            d["chunk_index"] = chunk_index
        if chunk_count is not None:
            d["chunk_count"] = chunk_count
        if checksum is not None:
            d["checksum"] = checksum
        if is_sequence is not None:
            d["is_sequence"] = is_sequence
        if force_kill is not None:
            d["force_kill"] = force_kill
        if credit is not None:
            d["credit"] = credit
        if unbounded is not None:
            d["unbounded"] = unbounded
        if output is not None:
            d["output"] = output

    @property
    def xid(self) -> MessageId | None:
        """Short name for :attr:`routing_id`."""
        return self.routing_id

    @property
    def flow_key(self) -> tuple[MessageId, MessageId | None]:
        """The (rid, xid) pair that numbers this frame's flow (TYP-3)."""
        return (self.id, self.routing_id)

    def replace(self, **changes: Any) -> Frame:
        """A copy with some fields changed (same result as ``attrs.evolve``, cheaper: it
        starts from the fields present instead of all 22).

        The common case (fields the frame has, or fields removed with ``None``) copies the
        instance dict and keeps its wire-key order; a field the frame lacks goes through
        ``__init__``, which puts it in its place."""
        d = self.__dict__.copy()
        for name, value in changes.items():
            if name in d:
                if value is None and name not in _HEAD_FIELDS:
                    del d[name]
                else:
                    d[name] = value
            elif value is not None or name not in _FIELDS:
                return Frame(**{**self.__dict__, **changes})
        return _from_fields(d)

    def __repr__(self) -> str:
        parts = [f"{self.frame_type.name}", f"id={self.id}"]
        if self.seq:
            parts.append(f"seq={self.seq}")
        for a in _REPR_FIELDS:
            v = getattr(self, a)
            if v is not None:
                parts.append(f"{a}={v!r}")
        if self.payload is not None:
            parts.append(f"payload=<{len(self.payload)} bytes>")
        if self.meta is not None:
            parts.append(f"meta={_short_meta(self.meta)}")
        return "Frame(" + ", ".join(parts) + ")"


#: Wire-key order of the fields (index = key number); the codec relies on it.
WIRE_FIELD_NAMES: tuple[str, ...] = (
    "version",
    "frame_type",
    "id",
    "seq",
    *(a.name for a in attrs.fields(Frame)[4:]),
)
# attrs drops class-level defaults; put them back for the optional fields so that a field
# missing from an instance's __dict__ reads as None (see the Frame docstring).
for _name in WIRE_FIELD_NAMES[4:]:
    setattr(Frame, _name, None)
del _name

#: The fields every frame's ``__dict__`` holds (see the Frame docstring).
_HEAD_FIELDS = frozenset(WIRE_FIELD_NAMES[:4])
_FIELDS = frozenset(WIRE_FIELD_NAMES)

_REPR_FIELDS = (
    "cap",
    "stream_id",
    "media_urn",
    "routing_id",
    "chunk_index",
    "chunk_count",
    "is_sequence",
    "unbounded",
    "output",
    "credit",
    "force_kill",
    "eof",
)


#: Meta keys whose values are protocol words (shown); every other meta value is the caller's
#: and may be a secret, so only its type and size are shown.
_WORD_KEYS = frozenset({"level", "attribution_class", "code", "network", "credit_dir"})


def _short_meta(meta: Mapping[str, Any]) -> str:
    out = []
    for k, v in meta.items():
        if k in _WORD_KEYS and isinstance(v, str) and len(v) <= 40:
            out.append(f"{k}={v!r}")
        else:
            out.append(f"{k}={describe(v)}")
    return "{" + ", ".join(out) + "}"


_new_frame = object.__new__
_set_attr = object.__setattr__


def _from_fields(d: dict[str, Any]) -> Frame:
    """A Frame whose ``__dict__`` is ``d``: present fields only, in wire-key order, as
    :meth:`Frame.__init__` would store them (for the builders and the codec's hot paths)."""
    frame: Frame = _new_frame(Frame)
    _set_attr(frame, "__dict__", d)
    return frame
