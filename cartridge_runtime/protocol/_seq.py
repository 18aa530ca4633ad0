"""Per-flow sequence numbers for outgoing frames (TYP-3..TYP-6)."""

from __future__ import annotations

from ._frame import Frame, MessageId

FlowKey = tuple[MessageId, MessageId | None]


class SeqAssigner:
    """Numbers the flow frames one sender writes, per (rid, xid) flow.

    Each flow counts 0, 1, 2, ...; after its END or ERR the flow is closed and any later flow
    frame for it is a *straggler*: :meth:`assign` returns ``None`` and counts it, so the
    writer drops it. Non-flow frames always get seq 0.
    """

    __slots__ = ("_closed", "_counters", "stragglers")

    #: Closed flows remembered to recognise stragglers; older ones are forgotten first.
    MAX_CLOSED = 4096

    def __init__(self) -> None:
        self._counters: dict[FlowKey, int] = {}
        self._closed: dict[FlowKey, None] = {}
        self.stragglers = 0

    def assign(self, frame: Frame) -> Frame | None:
        """``frame`` with its seq set, or ``None`` when its flow already ended."""
        ft = frame.frame_type
        if not ft.is_flow:
            return frame if frame.seq == 0 else frame.replace(seq=0)
        key = (frame.id, frame.routing_id)
        if key in self._closed:
            self.stragglers += 1
            return None
        n = self._counters.get(key, 0)
        if ft.is_terminal:
            self._counters.pop(key, None)
            self._closed[key] = None
            if len(self._closed) > self.MAX_CLOSED:
                del self._closed[next(iter(self._closed))]
        else:
            self._counters[key] = n + 1
        return frame if frame.seq == n else frame.replace(seq=n)

    def is_closed(self, rid: MessageId, xid: MessageId | None = None) -> bool:
        return (rid, xid) in self._closed

    def forget(self, rid: MessageId, xid: MessageId | None = None) -> None:
        """Drop all memory of a flow (e.g. a request id that will be reused)."""
        self._counters.pop((rid, xid), None)
        self._closed.pop((rid, xid), None)
