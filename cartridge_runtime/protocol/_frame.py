"""The frame model: one immutable value per wire frame.

A :class:`Frame` holds exactly the fields of the key table (FRM-4); ``None`` means the key
is absent. Frames are built with the per-type constructors in ``_builders`` (or directly)
and turned into bytes by ``_codec``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from ._constants import PROTOCOL_VERSION, FrameType


@attrs.frozen(slots=True, repr=False)
class MessageId:
    """A request or routing id: a 16-byte UUID or an unsigned integer (FRM-6).

    The two forms never compare equal, even when they would spell the same number.
    """

    value: bytes | int

    @classmethod
    def new(cls) -> MessageId:
        """A fresh random UUID id (version 4)."""
        b = bytearray(os.urandom(16))
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        return cls(bytes(b))

    @property
    def is_uuid(self) -> bool:
        return isinstance(self.value, bytes)

    def __str__(self) -> str:
        if isinstance(self.value, bytes):
            return str(uuid.UUID(bytes=self.value))
        return str(self.value)

    def __repr__(self) -> str:
        return f"MessageId({self})"


#: The id every non-request frame of the handshake uses (HELLO, POLICY, RELAY_*).
ZERO_ID = MessageId(0)


@attrs.frozen(slots=True, kw_only=True, repr=False)
class Frame:
    """One Bifaci frame. Field names follow the key table; ``None`` = key absent."""

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

    @property
    def xid(self) -> MessageId | None:
        """Short name for :attr:`routing_id`."""
        return self.routing_id

    @property
    def flow_key(self) -> tuple[MessageId, MessageId | None]:
        """The (rid, xid) pair that numbers this frame's flow (TYP-3)."""
        return (self.id, self.routing_id)

    def replace(self, **changes: Any) -> Frame:
        """A copy with some fields changed."""
        return attrs.evolve(self, **changes)

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


def _short_meta(meta: Mapping[str, Any]) -> str:
    out = []
    for k, v in meta.items():
        if isinstance(v, bytes | bytearray):
            out.append(f"{k}=<{len(v)} bytes>")
        else:
            r = repr(v)
            out.append(f"{k}={r if len(r) <= 60 else r[:57] + '...'}")
    return "{" + ", ".join(out) + "}"
