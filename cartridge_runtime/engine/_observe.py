"""Observers of calls and machine runs (``Engine.add_observer``): what OpenTelemetry export,
or any other instrument, hooks into.

The engine tells each observer about a call's start (:class:`CallInfo`), each metric and trace
event its handler reports (:class:`~cartridge_runtime.engine.Metric`,
:class:`~cartridge_runtime.engine.TraceEvent`), and its end (:class:`CallOutcome`); and about
every event of a machine run. With no observer registered none of this runs and a call counts
no bytes. An observer that raises is the observer's bug: the engine reports it on stderr once
and goes on without it for that call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ..protocol import ErrorReport
from ._events import Metric, TraceEvent

if TYPE_CHECKING:
    from ._call import CallState
    from ._errors import CallError

__all__ = ("CallInfo", "CallOutcome", "CallObserver", "Observation", "observe_call")


@attrs.frozen(kw_only=True)
class CallInfo:
    """A call as it starts.

    :ivar bytes_in: the size of the inputs known before sending (bytes, text as UTF-8,
        files); streamed inputs of unknown size count 0.
    """

    cap: str
    handler_cap: str
    cartridge: str
    bytes_in: int


@attrs.frozen(kw_only=True)
class CallOutcome:
    """A call as it ended: ``error`` is ``None`` on success, else the ERR it failed with."""

    error: ErrorReport | None
    bytes_out: int

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def code(self) -> str | None:
        """The error's code, ``None`` on success."""
        return None if self.error is None else self.error.code

    @property
    def attribution_class(self) -> str | None:
        """The error's attribution class, ``None`` on success."""
        return None if self.error is None else self.error.attribution_class


@runtime_checkable
class CallObserver(Protocol):
    """What :meth:`Engine.add_observer` takes. ``call_started`` returns a token handed back
    to the other two methods for the same call. ``machine_event`` gets every event of every
    machine run (``None`` as the event when a run starts, the result or error when it ends)."""

    def call_started(self, call: CallInfo) -> Any: ...
    def call_event(self, token: Any, event: Metric | TraceEvent) -> None: ...
    def call_finished(self, token: Any, outcome: CallOutcome) -> None: ...
    def machine_event(self, run: Any, event: Any) -> None: ...


def _size(value: Any) -> int:
    if isinstance(value, bytes | bytearray | memoryview):
        return memoryview(value).nbytes
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, os.PathLike):
        try:
            return os.stat(value).st_size
        except OSError:
            return 0
    if isinstance(value, list | tuple):
        return sum(_size(getattr(v, "value", v)) for v in value)
    return 0


def _complain(observer: Any, exc: BaseException) -> None:
    print(f"engine: observer {type(observer).__name__} failed: {exc!r}", file=sys.stderr)


class Observation:
    """One call as the observers see it (the engine holds it while the call runs)."""

    __slots__ = ("_live",)

    def __init__(self, live: list[tuple[CallObserver, Any]]) -> None:
        self._live = live

    def event(self, event: Metric | TraceEvent) -> None:
        for observer, token in list(self._live):
            try:
                observer.call_event(token, event)
            except Exception as exc:
                _complain(observer, exc)
                self._live.remove((observer, token))

    def finished(self, error: CallError | None, bytes_out: int) -> None:
        outcome = CallOutcome(error=None if error is None else error.report, bytes_out=bytes_out)
        live, self._live = self._live, []
        for observer, token in live:
            try:
                observer.call_finished(token, outcome)
            except Exception as exc:
                _complain(observer, exc)


def observe_call(
    observers: Sequence[CallObserver], state: CallState, cartridge: str
) -> Observation:
    """Tell ``observers`` a call starts; the :class:`Observation` follows it to its end."""
    info = CallInfo(
        cap=state.cap,
        handler_cap=state.handler_cap,
        cartridge=cartridge,
        bytes_in=sum(_size(value) for _, value in state.inputs),
    )
    live = []
    for observer in observers:
        try:
            live.append((observer, observer.call_started(info)))
        except Exception as exc:
            _complain(observer, exc)
    return Observation(live)
