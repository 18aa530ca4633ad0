"""A call's event queue: what the caller has not read yet, and the bound on its LOGs.

Data is bounded by credit; LOG and progress events are not (a cartridge may send them without
limit). So a call keeps at most ``EngineConfig.max_pending_logs`` of them unread: a counter
goes up with each one queued, and when it passes the bound the queue is scanned once: if more
than half the bound are really waiting, the oldest are dropped (down to half the bound) and
counted in ``Response.dropped_logs``. A scan happens at most once per half-bound of LOGs, so
the cost stays O(1) per event, and data events pay nothing.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .. import protocol as P
from ._connection._links import CallLink
from ._events import CallEvent, Log, Metric, Progress, TraceEvent

__all__ = ("CallQueue",)


class CallQueue:
    """The queue half of :class:`~._call.CallState`: events queued for the caller, and the
    LOG and progress events that make them (bounded by ``max_pending_logs``)."""

    # The call's own fields, read here. (No ``__slots__``: the call's instances keep a dict
    # for everything but the parts the compiled router touches.)
    conn: CallLink
    events: deque[tuple[CallEvent, str | None]]
    abandoned: bool
    receiver: P.BodyReceiver
    observation: Any
    #: LOG/progress events queued since the last scan (an upper bound of those unread).
    _logs_queued = 0
    #: LOG/progress events dropped because nobody read them in time.
    dropped_logs = 0
    max_pending_logs = 1000

    def _queue(self, ev: CallEvent, credit_stream: str | None) -> None:
        if self.abandoned:
            if credit_stream is not None:
                self.receiver.consumed(credit_stream)
            return
        self.events.append((ev, credit_stream))

    def _on_progress(self, ev: P.ProgressReceived, cost: str | None) -> str | None:
        self._queue(
            Progress(progress=ev.progress, message=ev.message, indeterminate=ev.indeterminate),
            None,
        )
        self._count_log()
        return cost

    def _on_log(self, ev: P.LogReceived, cost: str | None) -> str | None:
        event: CallEvent | None = None
        if ev.data is not None:  # a metric or a trace event (REQ-39); malformed: a log line
            if ev.level == P.METRIC_LEVEL:
                metric = P.read_metric(ev.data)
                if metric is not None:
                    name, value, labels = metric
                    totals = self.conn.metric_totals
                    totals[name] = totals.get(name, 0) + value
                    event = Metric(name=name, value=value, labels=labels)
            elif ev.level == P.TRACE_LEVEL:
                trace = P.read_trace(ev.data)
                if trace is not None:
                    event = TraceEvent(name=trace[0], attributes=trace[1])
            if event is not None and self.observation is not None:
                self.observation.event(event)
        if event is None:
            event = Log(
                level=ev.level,
                message=ev.message,
                attribution_class=ev.attribution_class,
                arg_urn=ev.arg_urn,
            )
        self._queue(event, None)
        self._count_log()
        return cost

    def _count_log(self) -> None:
        self._logs_queued += 1
        if self._logs_queued > self.max_pending_logs:
            self._trim_logs()

    def _trim_logs(self) -> None:
        """More LOG/progress events were queued than the bound since the last scan: if more
        than half the bound are really unread, drop the oldest of them, keeping half. The next
        scan is then at least half the bound of events away (O(1) per event)."""
        events = self.events
        waiting = sum(1 for ev, _ in events if type(ev) in _REPORTS)
        keep = self.max_pending_logs // 2
        if waiting > keep:
            drop = waiting - keep
            self.dropped_logs += drop
            kept: deque[tuple[CallEvent, str | None]] = deque()
            for entry in events:
                if drop and type(entry[0]) in _REPORTS:
                    drop -= 1
                    continue
                kept.append(entry)
            self.events = kept
            waiting = keep
        self._logs_queued = waiting


#: Events that LOG frames make: bounded together (``max_pending_logs``).
_REPORTS = frozenset((Log, Progress, Metric, TraceEvent))
