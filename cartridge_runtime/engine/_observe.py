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
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from .._item import Item
from ..protocol import ErrorReport
from ._events import Metric, TraceEvent
from ._inputs import ItemStream, ValueStream, Verified

if TYPE_CHECKING:
    from ._call import CallState
    from ._errors import CallError

__all__ = ("CallInfo", "CallOutcome", "CallObserver", "Observation", "observe_call")


@attrs.frozen(kw_only=True)
class CallInfo:
    """A call as it starts.

    :ivar bytes_in: the size of the inputs known before sending (bytes, text as UTF-8,
        files); streamed inputs of unknown size count 0 here, and in
        :attr:`CallOutcome.bytes_in` once sent.
    :ivar alias: the first alias the cartridge's manifest gives the handler's cap (``None``:
        none), a short, low-cardinality name for it.
    """

    cap: str
    handler_cap: str
    cartridge: str
    bytes_in: int
    alias: str | None = None


@attrs.frozen(kw_only=True)
class CallOutcome:
    """A call as it ended: ``error`` is ``None`` on success, else the ERR it failed with."""

    error: ErrorReport | None
    bytes_out: int
    #: The bytes of every input: the known sizes and what streamed inputs sent.
    bytes_in: int = 0

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


def _piece_size(piece: Any) -> int:
    if isinstance(piece, Verified):
        return len(piece.data)
    if isinstance(piece, Item):
        return _size(piece.value)
    return _size(piece)


class _Tally:
    """The input bytes of one call: known at its start, and counted as streams are sent."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    async def counted(self, source: AsyncIterable[Any]) -> AsyncIterator[Any]:
        async for piece in source:
            self.count += _piece_size(piece)
            yield piece

    def wrap(self, value: Any) -> Any:
        """``value`` with its streamed pieces counted (as it is when its size is known)."""
        if isinstance(value, ValueStream):
            return ValueStream(self.counted(value.source))
        if isinstance(value, ItemStream):
            return ItemStream(self.counted(value.source))
        if isinstance(value, AsyncIterable):
            return self.counted(value)
        return value


def _complain(observer: Any, exc: BaseException) -> None:
    print(f"engine: observer {type(observer).__name__} failed: {exc!r}", file=sys.stderr)


class Observation:
    """One call as the observers see it (the engine holds it while the call runs)."""

    __slots__ = ("_live", "_tally")

    def __init__(self, live: list[tuple[CallObserver, Any]], tally: _Tally) -> None:
        self._live = live
        self._tally = tally

    def event(self, event: Metric | TraceEvent) -> None:
        for observer, token in list(self._live):
            try:
                observer.call_event(token, event)
            except Exception as exc:
                _complain(observer, exc)
                self._live.remove((observer, token))

    def finished(self, error: CallError | None, bytes_out: int) -> None:
        outcome = CallOutcome(
            error=None if error is None else error.report,
            bytes_out=bytes_out,
            bytes_in=self._tally.count,
        )
        live, self._live = self._live, []
        for observer, token in live:
            try:
                observer.call_finished(token, outcome)
            except Exception as exc:
                _complain(observer, exc)


def observe_call(
    observers: Sequence[CallObserver], state: CallState, cartridge: str
) -> Observation:
    """Tell ``observers`` a call starts; the :class:`Observation` follows it to its end.

    Called before the call sends anything: its streamed inputs are swapped for counting
    ones, so the outcome's ``bytes_in`` holds what they sent.
    """
    tally = _Tally(sum(_size(value) for _, value in state.inputs))
    state.inputs[:] = [(media, tally.wrap(value)) for media, value in state.inputs]
    lookup = getattr(state.conn, "definition", None)  # a connection knows its manifest
    definition = lookup(state.handler_cap) if lookup is not None else None
    aliases = getattr(definition, "aliases", None) or ()
    info = CallInfo(
        cap=state.cap,
        handler_cap=state.handler_cap,
        cartridge=cartridge,
        bytes_in=tally.count,
        alias=aliases[0] if aliases else None,
    )
    live = []
    for observer in observers:
        try:
            live.append((observer, observer.call_started(info)))
        except Exception as exc:
            _complain(observer, exc)
    return Observation(live, tally)
