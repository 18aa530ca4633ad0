"""Running handlers: admission through the pools, worker tasks, the terminal frame.

Mixed into :class:`~cartridge_runtime.runtime._session.Session`; split out to keep each module
about one concern. The terminal of a request is decided here, once: a cancel's ERR wins over
an input error, which wins over the handler's own ERR, which wins over END.

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
import contextlib
import contextvars
import sys
import traceback
from typing import Any

import anyio
import sniffio

from cartridge_runtime.protocol import ATTRIBUTION_CLASSES, frames

from ._context import NetworkAccess
from ._errors import CartridgeError, handler_error_message
from ._peer import PeerInvoker
from ._request import Request
from ._specs import output_specs
from ._sync import run_perform
from ._wire import Active, WirePeer, WireReporter
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


def cancel_terminal(meta: Any) -> tuple[str, str, str]:
    """The (code, class, message) of the ERR that ends a cancelled request (fact sheet §4.7)."""
    if not isinstance(meta, dict) or not meta:
        return "CANCELLED", "internal", "Request cancelled"
    code = str(meta.get("code") or "CANCELLED")
    cls = str(meta.get("attribution_class") or "internal")
    if cls not in ATTRIBUTION_CLASSES:
        cls = "internal"
    detail = str(meta.get("message") or "")
    if code == "ABORTED":
        return code, cls, f"Request aborted by the host: {detail}"
    if code == "ABORTED_COLLATERAL":
        return (
            code,
            cls,
            f"Request aborted as collateral of a failure elsewhere in the run: {detail}",
        )
    if code == "CANCELLED" and not detail:
        return code, cls, "Request cancelled"
    return code, cls, detail or code


class HandlerRunner:
    """The handler half of a session (see the module docstring)."""

    # Provided by Session.
    runtime: Any
    pools: Any
    policy: str | None
    limits: Any
    active: dict[Any, Active]
    _tg: Any
    spec_cache: dict[tuple[str, str], tuple[list[Any], Any]]
    _idle: anyio.Event

    writer: FrameWriter

    async def send(self, frame: Any) -> None:  # pragma: no cover - Session's
        raise NotImplementedError

    #: Started requests not yet taken by a worker, and the wake-up events of idle workers
    #: (made by :meth:`_init_workers`).
    _ready: collections.deque[Active]
    _waiting_workers: list[Any]  # anyio.Event or _FutureWake

    def _init_workers(self) -> None:
        self._ready = collections.deque()
        self._waiting_workers = []
        self._new_scope: Any = anyio.CancelScope
        self._new_wake: Any = anyio.Event

    def _bind_backend(self) -> None:
        """Make cancel scopes and worker wake-ups with the running backend's own classes from
        now on: ``anyio.CancelScope()`` and ``anyio.Event()`` look the backend up on every
        call, which cost about 3% of a small request. On asyncio an idle worker waits on a
        bare future (:class:`_FutureWake`)."""
        self._new_scope = type(anyio.CancelScope())
        self._new_wake = (
            _FutureWake if sniffio.current_async_library() == "asyncio" else type(anyio.Event())
        )

    def _start(self, a: Active) -> None:
        a.started = True
        assert self._tg is not None
        self._ready.append(a)
        # Every ready request gets a worker of its own: an idle one woken here, or a new one.
        # (A worker that finishes meanwhile may take it first; the woken one then finds the
        # queue empty and waits again, so no request ever waits behind a running handler.)
        if self._waiting_workers:
            self._waiting_workers.pop().set()
        else:
            self._tg.start_soon(self._worker)

    async def _worker(self) -> None:
        ready = self._ready
        waiting = self._waiting_workers
        base = contextvars.copy_context()
        while True:
            if ready:
                await self._serve_request(ready.popleft())
                if contextvars.copy_context() != base:
                    # The handler changed context variables: end this worker so that the
                    # next request starts in a clean context, as in a task of its own.
                    return
                continue
            if len(waiting) >= IDLE_WORKERS:
                return
            wake = self._new_wake()
            waiting.append(wake)
            await wake.wait()

    def _admit_waiting(self) -> None:
        while (admitted := self.pools.admit_next()) is not None:
            _, a = admitted
            self._tg.start_soon(self._announce_and_start, a)

    async def _announce_and_start(self, a: Active) -> None:
        await self.send(
            frames.log(
                a.rid, "dequeued", "Request dequeued, handler starting", "internal", xid=a.xid
            )
        )
        self._start(a)

    async def _serve_request(self, a: Active) -> None:
        outcome: CartridgeError | None = None
        try:
            reporter = WireReporter(a)
            key = (a.cap, a.handler_urn)
            cached = self.spec_cache.get(key)
            if cached is None:
                cached = (
                    output_specs(self.runtime, a.cap, a.handler_urn),
                    self.runtime.cap_def_for(a.cap, a.handler_urn),
                )
                if len(self.spec_cache) < 1024:
                    self.spec_cache[key] = cached
            specs, definition = cached
            outputs = [a.make_output(spec, reporter) for spec in specs]
            req = Request(
                cap_urn=a.cap,
                input_package=a.package,
                outputs=outputs,
                reporter=reporter,
                network=NetworkAccess(lambda: self.policy),
                peer=PeerInvoker(WirePeer(self, a, reporter), reporter),  # type: ignore[arg-type]
                definition=definition,
            )
            context = self.runtime.context
            dry = context.dry(
                cap_urn=a.cap,
                handler_urn=a.handler_urn,
                limits=self.limits,
                policy=self.policy,
                message_id=a.rid,
            )
            wet = context.wet(req)
            with self._new_scope() as scope:
                a.scope = scope
                if a.cancel is not None or a.input_error is not None:
                    scope.cancel()
                try:
                    await run_perform(a.factory(), dry, wet, lambda: a.cancel is not None)
                    if a.input_error is None:
                        for out in outputs:
                            await out._finish_output()
                except CartridgeError as exc:
                    outcome = exc
                except Exception as exc:
                    print(f"cartridge: handler for {a.cap} failed:", file=sys.stderr)
                    traceback.print_exception(exc, file=sys.stderr)
                    outcome = CartridgeError(handler_error_message(exc))
            await self._terminal(a, outcome)
        finally:
            a.scope = None
            self.active.pop(a.rid, None)
            a.detach()
            with contextlib.suppress(Exception):
                self.pools.release(a.pool)
            self._admit_waiting()
            self._idle.set()

    async def _terminal(self, a: Active, outcome: CartridgeError | None) -> None:
        if a.terminal_sent:
            return
        a.terminal_sent = True
        if a.cancel is not None:
            code, cls, message = a.cancel
            await self.send(frames.err(a.rid, code, message, cls, xid=a.xid))
        elif a.input_error is not None:
            exc = a.input_error
            code = str(getattr(exc, "code", "PROTOCOL_ERROR"))
            await self.send(frames.err(a.rid, code, str(exc), "internal", xid=a.xid))
        elif outcome is not None:
            cls = (
                outcome.attribution_class
                if outcome.attribution_class in ATTRIBUTION_CLASSES
                else "internal"
            )
            await self.send(
                frames.err(
                    a.rid,
                    str(outcome.code),
                    outcome.message,
                    cls,
                    arg_urn=outcome.arg_urn,
                    xid=a.xid,
                )
            )
        else:
            progress, end_message = a.final
            end = frames.end(a.rid, xid=a.xid, progress=progress, message=end_message)
            if not self.writer.try_send(end):
                await self.writer.send(end)
        # Send the response now, ahead of this request's clean-up, so the host works on it
        # meanwhile. With several requests in flight this also means one write per response
        # rather than one per loop pass: measured faster, as both processes stay busy instead
        # of taking turns over large batches.
        self.writer.flush_now()
