"""Running handlers: the IO side of each admitted request, worker tasks, the terminal frame.

:class:`HandlerRunner` is the part of a session that runs handlers. The connection
(:class:`~cartridge_runtime.protocol.CartridgeConnection`) decides admission, cancels and the
terminal of each request (a cancel's ERR wins over an input error, which wins over the
handler's own ERR, which wins over END); the runner creates each request's :class:`~._wire.
Active`, runs its handler, sends the terminal the connection chose, and cancels handlers when
told to.

Each started request runs in a task of its own for as long as it runs, but tasks are reused:
a *worker* task serves one request, then takes the next ready one or waits (up to
:data:`IDLE_WORKERS` of them wait; extra ones end). Starting a request hands it to an idle
worker (one event set) or, when none is idle, starts a new worker, so a request never waits
behind another one's handler. Spawning an anyio task per request cost more than the rest of
a small request's dispatch. A worker whose handler changed context variables ends after it,
so no request sees another's context.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import sys
import traceback
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.abc
import sniffio

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.protocol import (
    AttributionClass,
    ErrorCode,
    ErrorReport,
    Frame,
    MessageId,
    ProtocolError,
    RequestPhase,
    ServedRequest,
    StreamAbandonedError,
)

from .._errors import CartridgeError, handler_error_message
from .._network import NetworkAccess
from .._output import OutputSpec, must_finish
from .._peer import PeerInvoker
from .._request import Request
from .._specs import output_specs
from .._sync import async_perform, run_perform
from ._served import OpFactory, ServedCartridge
from ._wire import Active, Connection, WirePeer, WireReporter
from ._writer import FrameWriter

#: Worker tasks kept waiting for the next request; more than that end when they are done.
IDLE_WORKERS = 64


class _FutureWake:
    """The wake-up of one idle worker on asyncio: a bare future. (``anyio.Event`` wraps an
    ``asyncio.Event``, which makes a future per waiter and keeps a queue of them.) Setting it
    after its waiter was cancelled does nothing."""

    __slots__ = ("_fut",)

    def __init__(self) -> None:
        self._fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def set(self) -> None:
        if not self._fut.done():
            self._fut.set_result(None)

    async def wait(self) -> None:
        await self._fut


class _Wake(Protocol):
    """An idle worker's wake-up (``anyio.Event`` or :class:`_FutureWake`)."""

    def set(self) -> object: ...
    async def wait(self) -> object: ...


#: Seconds running handlers may take to finish after stdin EOF before they are cancelled.
EOF_GRACE = 2.0


class HandlerRunner:
    """Runs the handlers of a session's requests (see the module docstring).

    :param conn: the session's connection (admission, cancels, terminals, pools).
    :param cartridge: what the handlers and their outputs come from.
    :param writer: where every frame goes.
    """

    def __init__(self, conn: Connection, cartridge: ServedCartridge, writer: FrameWriter) -> None:
        self.conn = conn
        self.cartridge = cartridge
        self.writer = writer
        #: The IO side of every open request, by request id.
        self.active: dict[MessageId, Active] = {}
        #: Output specs per (request URN, handler URN), with the cap definition they come from.
        self._specs: dict[tuple[str, str], tuple[list[OutputSpec], CapDef | None]] = {}
        #: Started requests not yet taken by a worker, and the wake-ups of idle workers.
        self._ready: collections.deque[Active] = collections.deque()
        self._waiting_workers: list[_Wake] = []
        self._new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope
        self._new_wake: Callable[[], _Wake] = anyio.Event
        self._tg: anyio.abc.TaskGroup | None = None
        self._idle = anyio.Event()
        #: The handlers' view of the network policy: one for the session, as it reads the
        #: connection's current policy whenever asked.
        self._network = NetworkAccess(lambda: conn.policy)

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        """Run workers in ``tg``, and make cancel scopes and worker wake-ups with the running
        backend's own classes from now on: ``anyio.CancelScope()`` and ``anyio.Event()`` look
        the backend up on every call, which cost about 3% of a small request. On asyncio an
        idle worker waits on a bare future (:class:`_FutureWake`)."""
        self._tg = tg
        self._new_scope = type(anyio.CancelScope())
        self._new_wake = (
            _FutureWake if sniffio.current_async_library() == "asyncio" else type(anyio.Event())
        )

    # -- what dispatch tells the runner -------------------------------------------------------

    def admit(self, request: ServedRequest[OpFactory], queued: bool) -> Active:
        """A request was admitted: make its IO side, and start it unless it is queued."""
        a = Active(request, self.writer, self.conn.limits)
        self.active[request.rid] = a
        if not queued:
            self._start(a)
        return a

    def start_dequeued(self, requests: tuple[ServedRequest[OpFactory], ...]) -> None:
        """Announce and start requests the pools admitted from the queue."""
        tg = self._tg
        assert tg is not None
        for request in requests:
            a = self.active.get(request.rid)
            if a is not None:
                tg.start_soon(self._announce_and_start, a)

    def abort(self, a: Active, message: str) -> None:
        """The request was cancelled or given up: its input ends as abandoned, its credit
        waits end, its handler is cancelled; a request that left the queue is forgotten."""
        a.feed.fail(StreamAbandonedError(f"input abandoned: {message}"))
        self._stop(a)

    def fail_input(self, a: Active, error: ProtocolError) -> None:
        """The requester broke a rule: the handler's input fails with ``error`` and the
        handler is cancelled (the connection answered a queued request already)."""
        a.feed.fail(error)
        self._stop(a)

    def _stop(self, a: Active) -> None:
        a.wake_all()
        if a.scope is not None:
            a.scope.cancel()
        elif a.request.phase is RequestPhase.DONE:  # it left the queue without running
            self.active.pop(a.rid, None)
            a.detach()
            self._idle.set()

    async def shutdown(self, *, graceful: bool) -> None:
        """Stop every request: at EOF, give complete requests a short grace first."""
        conn = self.conn
        closed = _reason("input closed before the request was complete")
        for a in list(self.active.values()):
            if not a.receiver.finished:
                conn.abandon(a.request, closed)
                self.abort(a, closed.message)
        if graceful and self.active:
            with anyio.move_on_after(EOF_GRACE):
                while self.active:
                    self._idle = anyio.Event()
                    await self._idle.wait()
        ending = _reason("the cartridge is shutting down")
        for a in list(self.active.values()):
            conn.abandon(a.request, ending)
            self.abort(a, ending.message)
        with anyio.move_on_after(EOF_GRACE):
            while any(x.request.phase is RequestPhase.RUNNING for x in self.active.values()):
                self._idle = anyio.Event()
                await self._idle.wait()

    # -- workers ------------------------------------------------------------------------------

    def _start(self, a: Active) -> None:
        tg = self._tg
        assert tg is not None
        self._ready.append(a)
        # Every ready request gets a worker of its own: an idle one woken here, or a new one.
        # (A worker that finishes meanwhile may take it first; the woken one then finds the
        # queue empty and waits again, so no request ever waits behind a running handler.)
        if self._waiting_workers:
            self._waiting_workers.pop().set()
        else:
            tg.start_soon(self._worker)

    async def _worker(self) -> None:
        ready = self._ready
        waiting = self._waiting_workers
        base = contextvars.copy_context()
        held = self.writer.held_while_running
        while True:
            # One cancel scope serves the worker's requests until one of them is cancelled:
            # entering and leaving anyio's scope cost about a twentieth of a small call. A
            # request's cancel cancels the scope (``Active.scope``) only while its handler
            # runs; the worker then leaves the scope, ends that request outside it and takes
            # a fresh scope for the next one.
            scope = self._new_scope()
            a: Active | None = None
            try:
                with scope:
                    while True:
                        if ready:
                            a = ready.popleft()
                            if not await held(self._serve_request(a, scope)):
                                break  # cancelled: end it outside the scope
                            a = None
                            if contextvars.copy_context() != base:
                                # The handler changed context variables: end this worker so
                                # that the next request starts in a clean context, as in a
                                # task of its own.
                                return
                            continue
                        if len(waiting) >= IDLE_WORKERS:
                            return
                        wake = self._new_wake()
                        waiting.append(wake)
                        await wake.wait()
            except BaseException:
                if a is not None:  # the session's own cancellation: no terminal, as before
                    self._forget(a)
                raise
            if a is None:
                continue
            # The request's handler was cancelled (or ran on past its cancel).
            try:
                await held(self._send_terminal(a, a.failure))
            finally:
                self._forget(a)
            if contextvars.copy_context() != base:
                return

    async def _announce_and_start(self, a: Active) -> None:
        await self.writer.send(self.conn.dequeued(a.request))
        self._start(a)

    async def _serve_request(self, a: Active, scope: anyio.CancelScope) -> bool:
        """Run request ``a``'s handler in the worker's ``scope``, then send its terminal and
        forget it; ``False`` when ``scope`` was cancelled (the handler raised out of here, or
        returned with :attr:`Active.failure` set): the worker ends it outside the scope."""
        request = a.request
        reporter = WireReporter(a)
        key = (request.cap, request.handler_urn)
        cached = self._specs.get(key)
        if cached is None:
            cartridge = self.cartridge
            cached = (
                output_specs(cartridge, request.cap, request.handler_urn),
                cartridge.cap_def_for(request.cap, request.handler_urn),
            )
            if len(self._specs) < 1024:
                self._specs[key] = cached
        specs, definition = cached
        outputs = [a.make_output(spec, reporter) for spec in specs]
        conn = self.conn
        req = Request(
            cap_urn=request.cap,
            input_package=a.package,
            outputs=outputs,
            reporter=reporter,
            network=self._network,
            peer_factory=functools.partial(_peer_invoker, conn, a, reporter),
            definition=definition,
            message_id=a.rid,
        )
        context = self.cartridge.context
        dry = context.dry(
            cap_urn=request.cap,
            handler_urn=request.handler_urn,
            limits=conn.limits,
            policy=conn.policy,
            message_id=a.rid,
        )
        wet = context.wet(req)
        failure: ErrorReport | None = None
        a.scope = scope
        if request.cancel is not None or request.input_error is not None:
            scope.cancel()
        try:
            op = request.handler()
            perform = async_perform(op)
            if perform is not None:
                await perform(dry, wet)
            else:
                await run_perform(op, dry, wet, lambda: request.cancel is not None)
            if request.input_error is None:
                for out in outputs:
                    if must_finish(out):
                        await out.close()
        except CartridgeError as exc:
            failure = ErrorReport(
                code=str(exc.code),
                attribution_class=exc.attribution_class,
                message=exc.message,
                arg_urn=exc.arg_urn,
            )
        except Exception as exc:
            print(f"cartridge: handler for {request.cap} failed:", file=sys.stderr)
            traceback.print_exception(exc, file=sys.stderr)
            failure = ErrorReport(
                code=CartridgeError.code,
                attribution_class=CartridgeError.attribution_class,
                message=handler_error_message(exc),
            )
        finally:
            a.scope = None
        if scope.cancel_called:
            a.failure = failure
            return False
        frame = self._end(a, failure)
        if frame is not None:
            await self.writer.send(frame)  # the worker forgets ``a`` if this is cancelled
            self.writer.flush()
        self._forget(a)
        return True

    async def _send_terminal(self, a: Active, failure: ErrorReport | None) -> None:
        frame = self._end(a, failure)
        if frame is not None:
            await self.writer.send(frame)
            self.writer.flush()

    def _end(self, a: Active, failure: ErrorReport | None) -> Frame | None:
        """Queue the request's terminal frame and write the queue; the frame when it must be
        sent with ``await writer.send`` instead (the queue is full), then written."""
        progress, message = a.final
        frame = self.conn.terminal(a.request, failure, progress, message)
        if frame is None:
            return None
        writer = self.writer
        if not writer.try_send(frame):
            return frame
        # Send the response now, ahead of this request's clean-up, so the host works on it
        # meanwhile. With several requests in flight this also means one write per response
        # rather than one per loop pass: measured faster, as both processes stay busy instead
        # of taking turns over large batches.
        writer.flush()
        return None

    def _forget(self, a: Active) -> None:
        """The request is over: free its pool slot and its state, start what that admits."""
        self.active.pop(a.rid, None)
        a.detach()
        conn = self.conn
        admitted = conn.finish(a.request)
        if conn.outbox:  # the CANCELs of peer calls the request left open
            for f in conn.outbox:
                self.writer.push(f)
            conn.outbox.clear()
        if admitted:
            self.start_dequeued(admitted)
        self._idle.set()


def _peer_invoker(conn: Connection, a: Active, reporter: WireReporter) -> PeerInvoker:
    """The peer calls of request ``a``, made when its handler first asks for them."""
    return PeerInvoker(WirePeer(conn, a, reporter), reporter)


def _reason(message: str) -> ErrorReport:
    return ErrorReport(
        code=ErrorCode.CANCELLED, attribution_class=AttributionClass.ENVIRONMENT, message=message
    )
