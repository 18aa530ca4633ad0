"""Negotiated limits (FRM-8, HSK-2): four positive integers, element-wise minimum."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._constants import (
    DEFAULT_INITIAL_CREDIT,
    DEFAULT_MAX_CHUNK,
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_REORDER_BUFFER,
    HARD_FRAME_CAP,
)
from ._errors import HandshakeError

LIMIT_NAMES = ("max_frame", "max_chunk", "max_reorder_buffer", "initial_credit")

#: Bytes a CHUNK frame needs around its data: map, keys, ids, checksum, stream id, item meta.
#: Used to keep a whole CHUNK inside max_frame when max_chunk is negotiated near it.
CHUNK_OVERHEAD = 1024


@attrs.frozen(slots=True, kw_only=True)
class Limits:
    """The four limits both sides agree on in HELLO."""

    max_frame: int = DEFAULT_MAX_FRAME
    max_chunk: int = DEFAULT_MAX_CHUNK
    max_reorder_buffer: int = DEFAULT_MAX_REORDER_BUFFER
    initial_credit: int = DEFAULT_INITIAL_CREDIT

    def negotiate(self, other: Limits) -> Limits:
        """The element-wise minimum of two proposals.

        :raises HandshakeError: a result is zero (no credit means no data can ever flow).
        """
        result = Limits(
            max_frame=min(self.max_frame, other.max_frame, HARD_FRAME_CAP),
            max_chunk=min(self.max_chunk, other.max_chunk),
            max_reorder_buffer=min(self.max_reorder_buffer, other.max_reorder_buffer),
            initial_credit=min(self.initial_credit, other.initial_credit),
        )
        for name in LIMIT_NAMES:
            if getattr(result, name) <= 0:
                raise HandshakeError(f"negotiated {name} is zero")
        return result

    @property
    def effective_chunk(self) -> int:
        """Data bytes per CHUNK such that a whole CHUNK frame fits in max_frame."""
        return max(1, min(self.max_chunk, self.max_frame - CHUNK_OVERHEAD))

    def to_meta(self) -> dict[str, int]:
        """The HELLO meta entries, in wire order."""
        return {name: getattr(self, name) for name in LIMIT_NAMES}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Limits:
        """Read the four limits from HELLO meta.

        :raises HandshakeError: one is missing or not a positive integer.
        """
        values = {}
        for name in LIMIT_NAMES:
            v = meta.get(name)
            if type(v) is not int or v <= 0:
                raise HandshakeError(
                    f"HELLO limit {name!r} must be a positive integer, got {v!r}"
                    if v is not None
                    else f"HELLO is missing limit {name!r}"
                )
            values[name] = v
        return cls(**values)


DEFAULT_LIMITS = Limits()
