"""What a caller holds while a call runs: the :class:`CallContext` that ``engine.call()``
returns (awaitable, or an async context manager), the :class:`Response` and ``collect()``.

Retries
-------
A call made with ``retry=`` (a :class:`~._supervision._retry.Retry`) is opened again after a
failure the policy covers, after its backoff: when the open itself failed (no instance could
start, it died before answering), and while the caller reads, as long as no output reached the
caller (an event of an output stream) and every input can be sent again (none was a stream).
The error that ends a call that is not retried says why when a retry was possible in
principle. Each attempt has its own ``timeout=``.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import cbor2

from ..protocol import MessageId, ready
from ._call import CallState
from ._errors import CallError, CallTimeout, EngineError
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
from ._output_check import OutputWatch, check_outputs
from ._supervision._retry import Retry, retry_refusal

__all__ = ("CallContext", "CallOptions", "OnRetry", "OpenCall", "OpenNow", "Response")

#: How a call is opened (the engine's): route ``cap``, start its cartridge if needed, take a
#: pool slot and send the request with ``inputs``, watched for ``activity_timeout``; the
#: running call.
OpenCall = Callable[[str, list[tuple[str, Any]], float | None], Awaitable[CallState]]

#: :data:`OpenCall` without a coroutine when nothing must wait, else ``None`` with nothing
#: done.
OpenNow = Callable[[str, list[tuple[str, Any]], float | None], CallState | None]

#: Told of each retry: the cap, the attempt that failed (1 for the first), the delay before
#: the next, and the failure.
OnRetry = Callable[[str, int, float, CallError], None]

_OUTPUT_EVENTS = (OutputStarted, OutputData, OutputItem)


@attrs.frozen(kw_only=True)
class CallOptions:
    """How one call runs: ``timeout`` per attempt, ``activity_timeout`` (``None``: the cap's
    or the engine's), ``retry`` (``None``: one attempt), ``check_outputs`` (``False``: its
    outputs are not held to their media definitions)."""

    timeout: float | None = None
    activity_timeout: float | None = None
    retry: Retry | None = None
    check_outputs: bool = True


class Response:
    """The response of one call, as yielded by ``async with engine.call(...) as response``.

    Iterate it for events in arrival order (the loop ends at END; an ERR raises
    :class:`CallError`), or ``await response.collect()`` for everything at once.
    """

    #: Checks each output that has a media definition as it ends (HST-24), when the call
    #: has some.
    _watch: OutputWatch | None = None

    def __init__(self, state: CallState, context: CallContext | None = None) -> None:
        self._state = state
        #: The context that retries the call, when it has a retry policy.
        self._retrying = context if context is not None and context.retries else None
        self._output_began = False
        if state.output_checks is not None:
            self._watch = OutputWatch(state.output_checks, state.cap)
        #: Neither watched, retried nor timed: events are taken straight from the call.
        self._plain = self._watch is None and self._retrying is None and state.deadline is None

    @property
    def attempts(self) -> int:
        """Attempts made so far (more than 1 after a retry)."""
        return self._retrying.attempt if self._retrying is not None else 1

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
    def connection(self) -> object:
        """The connection the call runs on, as an opaque handle (the engine matches a peer
        request from that cartridge process to the call it serves by it)."""
        return self._state.conn

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

    def __anext__(self) -> Awaitable[CallEvent]:
        if self._plain:
            # An event already queued, or the end, without a coroutine.
            state = self._state
            events = state.events
            if events:
                ev, credit_stream = events.popleft()
                if credit_stream is not None and not state.done:
                    state.credit_back(credit_stream)
                return ready(ev)
            if state.done and state.error is None:
                raise StopAsyncIteration
            return state.next_event(stop=True)  # type: ignore[return-value]
        return self._next()

    async def _next(self) -> CallEvent:
        if self._watch is not None:
            return await self._next_watched(self._watch)
        if self._retrying is not None:
            return await self._next_retrying()
        ev = await self._state.next_event()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def _next_watched(self, watch: OutputWatch) -> CallEvent:
        """The next event of a call whose outputs are held to their media definitions.

        :raises OutputInvalid: the event ends an output that breaks its definition.
        """
        if self._retrying is not None:
            ev = await self._next_retrying()
        else:
            got = await self._state.next_event()
            if got is None:
                raise StopAsyncIteration
            ev = got
        watch.see(ev)
        return ev

    async def _next_retrying(self) -> CallEvent:
        context = self._retrying
        assert context is not None
        while True:
            try:
                ev = await self._state.next_event()
            except CallError as exc:
                self._state = await context.again(exc, output_began=self._output_began)
                continue
            if ev is None:
                raise StopAsyncIteration
            if isinstance(ev, _OUTPUT_EVENTS):
                self._output_began = True
            return ev

    async def collect(self) -> Result:
        """Read the rest of the response and join it per output.

        :raises CallError: the call failed (ERR, death, cancel).
        """
        if self._retrying is not None:
            return await self._collect_retrying()
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
        if state.output_checks is not None:
            check_outputs(state.output_checks, state.cap, outputs)
        return Result(
            outputs=outputs,
            logs=tuple(logs),
            progress=tuple(progress),
            end_meta=self.end_meta,
            dropped_logs=state.dropped_logs + dropped,
            metrics=tuple(metrics),
            traces=tuple(traces),
        )

    async def _collect_retrying(self) -> Result:
        """:meth:`collect`, each failure it covers retried by the call's policy."""
        context = self._retrying
        assert context is not None
        self._retrying = None  # the attempts below collect plainly
        try:
            while True:
                try:
                    result = await self.collect()
                except CallError as exc:
                    self._state = await context.again(exc, output_began=self._output_began)
                    continue
                return attrs.evolve(result, attempts=context.attempt)
        finally:
            self._retrying = context

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
        options: CallOptions | None = None,
        on_retry: OnRetry | None = None,
        open_now: OpenNow | None = None,
    ) -> None:
        self._open_call = open_call
        self._open_now = open_now
        self._cap = cap
        self._inputs = inputs
        self._options = options or CallOptions()
        self._on_retry = on_retry
        self._state: CallState | None = None
        #: The attempt running now (1 for the first).
        self.attempt = 1

    @property
    def retries(self) -> bool:
        """Whether the call has a retry policy allowing more than one attempt."""
        retry = self._options.retry
        return retry is not None and retry.attempts > 1

    def __await__(self) -> Generator[Any, None, Result]:
        return self._collect().__await__()

    async def _collect(self) -> Result:
        async with self as response:
            return await response.collect()

    async def __aenter__(self) -> Response:
        if self._state is not None:
            raise EngineError("a call runs once: make a new engine.call(...) to call again")
        options = self._options
        if options.retry is None and options.timeout is None:  # the plain call, kept short
            opened = None
            if self._open_now is not None:  # nothing to wait for: no coroutine
                opened = self._open_now(self._cap, self._inputs, options.activity_timeout)
            if opened is None:
                opened = await self._open_call(self._cap, self._inputs, options.activity_timeout)
            state = opened
            if not options.check_outputs:
                state.output_checks = None
            self._state = state
            return Response(state)
        if self.retries:
            while True:
                try:
                    state = await self._open_once()
                    break
                except CallError as exc:
                    await self._before_retry(exc, output_began=False)
        else:
            state = await self._open_once()
        return Response(state, self)

    async def _open_once(self) -> CallState:
        options = self._options
        timeout = options.timeout
        if timeout is None:
            state = await self._open_call(self._cap, self._inputs, options.activity_timeout)
        else:
            deadline = anyio.current_time() + timeout
            with anyio.move_on_after(timeout) as scope:
                state = await self._open_call(self._cap, self._inputs, options.activity_timeout)
            if scope.cancelled_caught:
                raise CallTimeout(
                    f"the call to {self._cap} could not start within its timeout of "
                    f"{timeout:g} s (start-up or a full pool)"
                )
            state.deadline = deadline
            state.timeout = timeout
        if not options.check_outputs:
            state.output_checks = None
        self._state = state
        return state

    async def again(self, error: CallError, *, output_began: bool) -> CallState:
        """The running attempt failed with ``error``: the next attempt's call, once its backoff
        passed and it opened.

        :raises CallError: ``error`` (saying why when a retry was possible in principle), when
            the policy does not retry it; or the last attempt's failure.
        """
        while True:
            await self._before_retry(error, output_began=output_began)
            output_began = False
            try:
                return await self._open_once()
            except CallError as exc:
                error = exc

    async def _before_retry(self, error: CallError, *, output_began: bool) -> None:
        """Return after the backoff when the policy retries ``error``; raise it otherwise."""
        policy = self._options.retry
        assert policy is not None
        refusal = retry_refusal(
            policy,
            self.attempt,
            error.code,
            error.attribution_class,
            output_began=output_began,
            replayable=not any(hasattr(value, "__aiter__") for _, value in self._inputs),
        )
        if refusal is not None:
            if refusal:
                raise _noted(error, refusal) from error
            raise error
        delay = policy.delay(self.attempt)
        if self._on_retry is not None:
            self._on_retry(self._cap, self.attempt, delay, error)
        await anyio.sleep(delay)
        self.attempt += 1

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._state is not None:
            self._state.abandon()


def _noted(error: CallError, note: str) -> CallError:
    """A copy of ``error`` whose message ends with ``note`` in brackets."""
    noted = copy.copy(error)
    noted.message = f"{error.message} ({note})"
    noted.args = (noted.message,)
    return noted
