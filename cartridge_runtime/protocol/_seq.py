"""Per-flow sequence numbers for outgoing frames (TYP-3..TYP-6)."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any, Protocol

from ._constants import PURE_PYTHON_ENV, FrameType
from ._frame import Frame, MessageId

FlowKey = tuple[MessageId, MessageId | None]

#: The internal flow key: the raw id values. A MessageId's identity is its value (bytes and
#: int never compare equal), so this keys the same flows while hashing in C instead of through
#: MessageId's Python ``__hash__``.
_RawKey = tuple[bytes | int, bytes | int | None]

#: Per frame-type code (list index: no Enum ``__hash__`` call): 0 not a flow frame, 1 a flow
#: frame, 2 a terminal flow frame (END, ERR).
_KIND: tuple[int, ...] = tuple(
    0 if t is None or not t.is_flow else (2 if t.is_terminal else 1)
    for t in (
        next((f for f in FrameType if f.value == code), None) for code in range(max(FrameType) + 1)
    )
)


class StragglerCount(Protocol):
    """Where a :class:`SeqAssigner` counts the stragglers it refuses (a connection's
    statistics, or the assigner itself)."""

    stragglers: int


class SeqAssigner:
    """Numbers the flow frames one sender writes, per (rid, xid) flow.

    Each flow counts 0, 1, 2, ...; after its END or ERR the flow is closed and any later flow
    frame for it is a *straggler*: :meth:`assign` returns ``None`` and counts it, so the
    writer drops it. Non-flow frames always get seq 0.

    A connection core owns one (numbering is a protocol rule); its shell's outbox asks it for
    each frame's seq. Stragglers are counted in ``counts`` (default: :attr:`stragglers`).

    :meth:`number` gives just the seq (no copy of the frame), for a writer that passes it to
    :func:`~cartridge_runtime.protocol.encode_frame` itself.
    """

    __slots__ = ("_closed", "_counters", "_counts", "stragglers")

    #: Closed flows remembered to recognise stragglers; older ones are forgotten first.
    MAX_CLOSED = 4096

    def __init__(self, counts: StragglerCount | None = None) -> None:
        self._counts: StragglerCount = self if counts is None else counts
        self._counters: dict[_RawKey, int] = {}
        # FIFO of closed flows: an OrderedDict drops its oldest entry in O(1) (a plain dict's
        # next(iter()) scans past every deleted slot at its front).
        self._closed: OrderedDict[_RawKey, None] = OrderedDict()
        self.stragglers = 0

    def number(self, frame: Frame) -> int | None:
        """The seq ``frame`` goes out with, or ``None`` when its flow already ended (a
        straggler, counted). Advances the flow's counter."""
        kind = _KIND[frame.frame_type]
        if not kind:
            return 0
        r = frame.routing_id
        key = (frame.id.value, None if r is None else r.value)
        closed = self._closed
        if key in closed:
            self._counts.stragglers += 1
            return None
        counters = self._counters
        if kind == 2:
            n = counters.pop(key, 0)
            closed[key] = None
            if len(closed) > self.MAX_CLOSED:
                closed.popitem(last=False)
        else:
            n = counters.get(key, 0)
            counters[key] = n + 1
        return n

    def encode_numbered(
        self, frames: list[Frame], start: int, out: list[Any], max_frame: int
    ) -> int:
        """Number and encode ``frames[start:]`` onto ``out`` (the wire bytes of each, as
        :meth:`number` and :func:`~cartridge_runtime.protocol.encode_frame` give them) while
        each is a small frame of a flow still open; return the index of the first frame
        left to the caller's own per-frame path (``len(frames)`` when none was), which
        nothing here has counted or numbered.

        A compiled fast path: without it (not built, or switched off) every frame is left
        to the caller.
        """
        if _c_encode_numbered is None:
            return start
        n: int = _c_encode_numbered(
            self._counters, self._closed, self.MAX_CLOSED, frames, start, out, max_frame
        )
        return n

    def assign(self, frame: Frame) -> Frame | None:
        """``frame`` with its seq set, or ``None`` when its flow already ended."""
        n = self.number(frame)
        if n is None:
            return None
        return frame if frame.seq == n else frame.replace(seq=n)

    def is_closed(self, rid: MessageId, xid: MessageId | None = None) -> bool:
        """Whether the flow ended (a later flow frame of it is a straggler)."""
        return (rid.value, None if xid is None else xid.value) in self._closed

    def forget(self, rid: MessageId, xid: MessageId | None = None) -> None:
        """Drop all memory of a flow (e.g. a request id that will be reused)."""
        key = (rid.value, None if xid is None else xid.value)
        self._counters.pop(key, None)
        self._closed.pop(key, None)


#: ``_speedups.encode_numbered``, or ``None`` (not built, or ``CARTRIDGE_RUNTIME_PURE_PYTHON``).
_c_encode_numbered: Any = None


def _load_numbering_speedups() -> bool:
    global _c_encode_numbered
    if os.environ.get(PURE_PYTHON_ENV):
        return False
    try:
        from ._speedups import configure_numbering, encode_numbered
    except ImportError:
        return False
    configure_numbering(bytes(_KIND))
    _c_encode_numbered = encode_numbered
    return True


_load_numbering_speedups()
