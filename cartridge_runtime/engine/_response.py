"""What a caller holds while a call runs: the :class:`CallContext` that ``engine.call()``
returns (awaitable, or an async context manager), the :class:`Response` and ``collect()``."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import cbor2

from ..protocol import MessageId
from ._call import CallState
from ._errors import CallTimeout, EngineError
from ._events import (
    CallEvent,
    Item,
    Log,
    Metric,
    OutputData,
    OutputItem,
    OutputResult,
    OutputStarted,
    Progress,
    Result,
    TraceEvent,
)

__all__ = ("CallContext", "OpenCall", "Response")

#: How a call is opened (the engine's): route ``cap``, start its cartridge if needed, take a
#: pool slot and send the request with ``inputs``; the running call.
OpenCall = Callable[[str, list[tuple[str, Any]]], Awaitable[CallState]]


class Response:
    """The response of one call, as yielded by ``async with engine.call(...) as response``.

    Iterate it for events in arrival order (the loop ends at END; an ERR raises
    :class:`CallError`), or ``await response.collect()`` for everything at once.
    """

    def __init__(self, state: CallState) -> None:
        self._state = state

    @property
    def cap(self) -> str:
        return self._state.cap

    @property
    def cartridge(self) -> str:
        """The name of the cartridge serving the call."""
        return self._state.conn.name

    @property
    def rid(self) -> MessageId:
        return self._state.rid

    @property
    def done(self) -> bool:
        return self._state.done

    @property
    def dropped_logs(self) -> int:
        """LOG and progress events dropped unread (the oldest first), because more than
        ``EngineConfig.max_pending_logs`` of them waited for the caller."""
        return self._state.dropped_logs

    @property
    def end_meta(self) -> Mapping[str, Any] | None:
        """END's meta (``exit_code``, ``progress``, ``message``) once the call ended."""
        return self._state.end_meta

    def __aiter__(self) -> Response:
        return self

    async def __anext__(self) -> CallEvent:
        state = self._state
        if state.events and state.deadline is None:
            return state.take_queued()  # already queued: no second coroutine
        ev = await state.next_event()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def collect(self) -> Result:
        """Read the rest of the response and join it per output.

        :raises CallError: the call failed (ERR, death, cancel).
        """
        parts: dict[str | None, list[bytes]] = {}
        values: dict[str | None, list[Any]] = {}
        odd: set[str | None] = set()
        items: dict[str | None, list[Item]] = {}
        info: dict[str | None, tuple[str, bool]] = {}
        # The newest reports only, as for the unread queue (see ``_call``): a flood of LOGs
        # must not grow a collected result without limit.
        bound = self._state.max_pending_logs
        logs: deque[Log] = deque(maxlen=bound)
        progress: deque[Progress] = deque(maxlen=bound)
        metrics: deque[Metric] = deque(maxlen=bound)
        traces: deque[TraceEvent] = deque(maxlen=bound)
        dropped = 0
        state = self._state
        fast = state.deadline is None  # with a timeout, every event checks the deadline
        while True:
            # Take what is already queued without a coroutine per event.
            ev: CallEvent | None = (
                state.take_queued() if fast and state.events else await state.next_event()
            )
            if ev is None:
                break
            if isinstance(ev, OutputData):
                v = ev.value
                values.setdefault(ev.output, []).append(v)
                if isinstance(v, bytes):
                    parts.setdefault(ev.output, []).append(v)
                elif isinstance(v, str):
                    parts.setdefault(ev.output, []).append(v.encode("utf-8"))
                else:
                    odd.add(ev.output)
                    parts.setdefault(ev.output, []).append(cbor2.dumps(v))
            elif isinstance(ev, OutputItem):
                items.setdefault(ev.output, []).append(Item(value=ev.value, meta=ev.meta))
            elif isinstance(ev, OutputStarted):
                info.setdefault(ev.output, (ev.media_urn, ev.is_sequence))
            elif isinstance(ev, Log):
                dropped += len(logs) == bound
                logs.append(ev)
            elif isinstance(ev, Progress):
                dropped += len(progress) == bound
                progress.append(ev)
            elif isinstance(ev, Metric):
                dropped += len(metrics) == bound
                metrics.append(ev)
            elif isinstance(ev, TraceEvent):
                dropped += len(traces) == bound
                traces.append(ev)
        outputs = {
            name: OutputResult(
                output=name,
                media_urn=media,
                is_sequence=seq,
                data=b"".join(parts.get(name, ())),
                values=tuple(values.get(name, ())) if name in odd else (),
                items=tuple(items.get(name, ())),
            )
            for name, (media, seq) in info.items()
        }
        return Result(
            outputs=outputs,
            logs=tuple(logs),
            progress=tuple(progress),
            end_meta=self.end_meta,
            dropped_logs=state.dropped_logs + dropped,
            metrics=tuple(metrics),
            traces=tuple(traces),
        )

    async def cancel(self, force_kill: bool = False) -> None:
        """Ask the cartridge to cancel the call (CANCELLED, class user).

        The response then ends with :class:`CallError` ``CANCELLED``. If the cartridge has not
        ended the call within ``EngineConfig.cancel_grace``, the call fails locally with
        ``CANCELLED`` (its pool slot is freed) or, with ``force_kill``, the process is killed.
        A cancel before any frame of the call left the engine fails it at once, unsent.
        """
        self._state.cancel(force_kill=force_kill)
        await anyio.lowlevel.checkpoint()


class CallContext:
    """What :meth:`Engine.call` returns: await it for the whole :class:`Result`, or use it as
    ``async with engine.call(...) as response`` to stream (as aiohttp's request context).
    Either way it runs the call once."""

    def __init__(
        self,
        open_call: OpenCall,
        cap: str,
        inputs: list[tuple[str, Any]],
        timeout: float | None = None,
    ) -> None:
        self._open_call = open_call
        self._cap = cap
        self._inputs = inputs
        self._timeout = timeout
        self._state: CallState | None = None

    def __await__(self) -> Generator[Any, None, Result]:
        return self._collect().__await__()

    async def _collect(self) -> Result:
        async with self as response:
            return await response.collect()

    async def __aenter__(self) -> Response:
        if self._state is not None:
            raise EngineError("a call runs once: make a new engine.call(...) to call again")
        timeout = self._timeout
        if timeout is None:
            state = await self._open_call(self._cap, self._inputs)
        else:
            deadline = anyio.current_time() + timeout
            with anyio.move_on_after(timeout) as scope:
                state = await self._open_call(self._cap, self._inputs)
            if scope.cancelled_caught:
                raise CallTimeout(
                    f"the call to {self._cap} could not start within its timeout of "
                    f"{timeout:g} s (start-up or a full pool)"
                )
            state.deadline = deadline
            state.timeout = timeout
        self._state = state
        return Response(state)

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._state is not None:
            self._state.abandon()
