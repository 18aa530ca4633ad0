"""One engine call: opening it, receiving its response, credit, cancel.

1. Nothing of a call leaves before its REQ: the REQ (and a small body with it) is queued
   synchronously when the call starts, so every later frame of the call follows it.
2. A call ends exactly once (:meth:`CallState._finish`): its flow is forgotten, its pool
   slot released and its caller woken there, whatever ended it (END, ERR, cancel, timeout,
   the cartridge's death); frames that come after are stragglers.
3. Credit goes back only as fast as the caller takes data, so what a call holds is bounded
   by its window, not by the response's size.

Theory of operation
-------------------
A :class:`CallState` is registered in its connection under the call's request id. When it
opens, its REQ is queued to the connection's writer synchronously, and for small in-memory
inputs the whole request body with it (see :mod:`._inputs`), so every later frame of the call
(a CANCEL included) is ordered after them on the wire. Larger or lazy inputs are streamed by an
:class:`~._inputs.InputSender` task under credit.

The connection's reader hands the call every response frame; it runs them through a sans-IO
:class:`BodyReceiver` (which validates the response and decodes chunks) and queues the
resulting events. (The common valid frames of a plain call do all of this in C, straight
from the bytes of the block they came in, with no frame made,
:func:`~cartridge_runtime.protocol.block_router`, or one call per frame,
:func:`~cartridge_runtime.protocol.response_router`, both registered below; every other frame
comes to :meth:`CallState.on_frame`. A small request is likewise written straight to its wire
bytes, :func:`~cartridge_runtime.protocol.request_wire`.) The caller takes events from :class:`Response`;
each data event it takes is reported as consumed, so CREDIT goes back to the cartridge only as
fast as the caller reads: memory stays bounded whatever the size. Before the caller blocks on
an empty queue, pending credit is flushed (otherwise a cartridge holding a half window would
wait forever). The caller blocks on an :class:`anyio.Event` made only when it has to wait.

Logs nobody reads
-----------------
LOG and progress events are bounded per call (``EngineConfig.max_pending_logs``), the oldest
unread dropped and counted: see :mod:`._call_queue`. ``collect()`` keeps the newest
``max_pending_logs`` logs and progress reports in the :class:`Result` and counts the rest.

Timeout
-------
A call opened with ``timeout=`` has a deadline (:attr:`CallState.deadline`, on the event
loop's clock). The caller's waits for events end there, and every event taken after it is
refused: the call is then cancelled on the wire (a CANCEL with code ``TIMEOUT``) and failed at
once with :class:`~._errors.CallTimeout`, without waiting for the cartridge's answer. Calls
without a timeout pay nothing for it.

Activity
--------
Each frame a call receives adds one to :attr:`CallState.frames`: that is all the hot path
pays. The engine's watchdog (:mod:`._supervision._activity`) looks at the count every quarter
of the call's activity timeout and, after a whole timeout without a frame (and without events
waiting for the caller), calls :meth:`CallState.expire_inactive`: a CANCEL with code
``TIMEOUT`` goes out and the call fails at once with :class:`~._errors.CallTimeout` (HST-20).

Cancel
------
``cancel()`` before any frame of the call left the process takes the frames back and fails the
call at once with ``CANCELLED``: the cartridge never hears of it. Otherwise a CANCEL goes out
and the call waits for the cartridge's terminal frame, at most ``EngineConfig.cancel_grace``
seconds: then a plain cancel fails the call locally with ``CANCELLED`` (its pool slot is
released; frames that still arrive for its request id are counted as stragglers and dropped),
and ``force_kill`` kills the process. A cancel therefore never hangs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import cbor2

from .. import protocol as P
from .._plumbing import Wake
from ..protocol import AttributionClass, ErrorCode, Frame, FrameType, MessageId, frames
from ._call_queue import CallQueue
from ._connection._gate import Chain
from ._connection._links import CallLink
from ._errors import CallError, CallTimeout
from ._events import (
    CallEvent,
    OutputData,
    OutputEnded,
    OutputItem,
    OutputStarted,
)
from ._inputs import (
    INLINE_MAX,
    Inputs,
    InputSender,
    InputValue,
    normalize_inputs,
    request_flow,
)

__all__ = ("CallState", "InputValue", "Inputs", "normalize_inputs")

_CHUNK = FrameType.CHUNK
_CREDIT = FrameType.CREDIT
_INPUT_ERRORS = (OSError, P.ProtocolError, TypeError, ValueError, cbor2.CBOREncodeError)


class CallState(CallQueue):
    """The engine side of one call (internal; the caller sees :class:`Response`)."""

    # The parts a response frame touches live in slots, where the compiled router
    # (``protocol.compile_response_path``) reads and writes them without a look-up; the
    # rest in the instance dict (which :class:`CallQueue` brings), most as class defaults.
    __slots__ = (
        "_outputs",
        "_queued",
        "_waiter",
        "abandoned",
        "done",
        "end_meta",
        "events",
        "frames",
        "observation",
        "receiver",
        "xid",
    )

    #: The media definitions its outputs are held to when they end (an
    #: ``_output_check.OutputChecks``), set on the calls that have some; None: nothing is
    #: checked (HST-24).
    output_checks: Any = None

    # What most calls never change is a class default, set on the instance only when it
    # changes: a call is made per request, and each attribute set costs it.
    error: CallError | None = None
    cancel_requested = False
    _ended: anyio.Event | None = None  # a cancel timer, while it waits for the end
    _sender: InputSender | None = None
    #: When the caller's ``timeout=`` runs out (``anyio.current_time()`` clock), if any.
    deadline: float | None = None
    timeout: float | None = None
    bytes_out = 0
    #: Its activity timeout, seconds, when it has one; and what the watchdog saw of it.
    activity_limit: float | None = None
    silence: Any = None

    def __init__(
        self,
        conn: CallLink,
        *,
        cap: str,
        handler_cap: str,
        inputs: list[tuple[str, Any]],
        chain: Chain | None,
        cancel_grace: float,
        max_pending_logs: int = 1000,
    ) -> None:
        self.done = False
        self.abandoned = False
        #: The engine's observer of this call (``Engine.add_observer``), or None: then no
        #: byte is counted and nothing is recorded.
        self.observation: Any = None
        #: Frames received for this call (the activity the watchdog looks at).
        self.frames = 0
        #: Queue positions of the frames queued at open, while they may still be withdrawn.
        self._queued: tuple[tuple[int, int], tuple[int, int]] | None = None
        self._waiter: Wake | None = None  # the caller, while it waits for events
        self.end_meta: Mapping[str, Any] | None = None
        self.conn = conn
        self.cap = cap
        self.handler_cap = handler_cap
        self.rid = MessageId.new()
        self.xid: MessageId | None = conn.next_xid()
        self.inputs = inputs
        self._chain = chain
        self._cancel_grace = cancel_grace
        #: The connection's limits when the call opened (what its request is sized by).
        self.limits = limits = conn.limits
        self.receiver = _new_receiver(self.rid, self.xid, limits.initial_credit)
        self.events: deque[tuple[CallEvent, str | None]] = deque()
        self._outputs: dict[str, tuple[str | None, str, bool]] = {}
        if max_pending_logs != 1000:
            self.max_pending_logs = max(2, max_pending_logs)

    # -- start -----------------------------------------------------------------------------

    def start(self) -> None:
        """Register with the connection and queue the REQ (and, for small in-memory inputs,
        the whole body) synchronously, so nothing of the call can overtake it; bigger
        inputs are streamed by a task started here."""
        conn = self.conn
        limits = self.limits
        inputs = self.inputs
        # (``None`` when the inputs are not small byte strings, or in pure Python.)
        wire = P.request_wire(
            self.rid,
            self.xid,
            self.cap,
            inputs,
            limits.effective_chunk,
            limits.initial_credit,
            INLINE_MAX,
            limits.max_frame,
        )
        conn.add_flow(self.rid, self)
        if wire is not None:
            # A small request, REQ to END, queued as its wire bytes (no frame made).
            queued = conn.send_wire(wire, 2 + 3 * len(inputs))
            if queued is not None:
                self._queued = queued
                return
        first = conn.mark()
        conn.hold()
        try:
            body = request_flow(self.cap, self.inputs, self.rid, self.xid, limits)
            if body is None:
                conn.send(frames.req(self.rid, self.cap, xid=self.xid))
            else:
                # The whole flow, REQ to END, is queued here: numbered 0, 1, 2... as encoded
                # (no copy of a frame), in one call.
                conn.send_flow(body)
            self._queued = (first, conn.mark())
        except P.ProtocolError as exc:  # e.g. an item's meta over max_frame
            self._abort_input(0, self.inputs[0][0] if self.inputs else "", exc)
            return
        finally:
            conn.release()
        if body is None:
            self._sender = InputSender(self.inputs, self.rid, self.xid, limits, self._send)
            conn.spawn(self._send_inputs)

    async def _send_inputs(self) -> None:
        sender = self._sender
        assert sender is not None
        with sender.scope:
            try:
                await sender.run()
            except _INPUT_ERRORS as exc:
                self._abort_input(*sender.position, exc)
            except Exception as exc:  # an input iterator raised: the call fails, not the engine
                self._abort_input(*sender.position, exc)

    def _abort_input(self, index: int, media: str, exc: BaseException) -> None:
        if self.done:
            return
        self.conn.send(
            frames.cancel(
                self.rid,
                code=ErrorCode.INVALID_REQUEST,
                attribution_class=AttributionClass.INPUT,
                message="the caller could not send an argument",
                xid=self.xid,
            )
        )
        self._finish(
            CallError(
                ErrorCode.INVALID_REQUEST,
                AttributionClass.INPUT,
                f"input {index} ({media}) could not be sent: {type(exc).__name__}: {exc}",
                arg_urn=media or None,
            )
        )
        self.abandoned = True

    def _send(self, frame: Frame) -> None:
        if self.cancel_requested or self.done:
            return  # a stopped sender's last frames (it stops at its next checkpoint)
        self._queued = None
        self.conn.send(frame)

    # -- frames from the cartridge ---------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        self.frames += 1
        ft = frame.frame_type
        if ft is _CREDIT:
            if self._sender is not None:
                self._sender.grant(frame.stream_id, frame.credit or 0)
            return
        if self.done:
            self.conn.counters.stragglers += 1
            return
        self._queued = None
        r, x = frame.routing_id, self.xid
        if r is not x and (r is None or x is None or r.value != x.value):  # r != x, cheaper
            self.conn.counters.protocol_errors += 1  # xid not copied back; routed by rid anyway
        receiver = self.receiver
        try:
            events = receiver.receive(frame)
        except P.ProtocolError as exc:
            self.conn.counters.protocol_errors += 1
            self.conn.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.PROTOCOL_ERROR,
                    attribution_class=AttributionClass.INTERNAL,
                    message=str(exc),
                    xid=self.xid,
                )
            )
            self._finish(
                CallError(
                    ErrorCode.PROTOCOL_ERROR,
                    AttributionClass.INTERNAL,
                    f"cartridge {self.conn.name} broke the protocol: {exc}",
                )
            )
            return
        if self.observation is not None and ft is _CHUNK and frame.payload:
            self.bytes_out += len(frame.payload)
        credits = receiver.data_to_send()
        if credits:
            for credit in credits:
                self.conn.send(credit)
            cost = None
        else:
            # A CHUNK costs one credit, paid back when the caller takes its first event; one
            # the receiver already granted back (a continuation fragment) costs nothing.
            cost = frame.stream_id if ft is _CHUNK else None
        for ev in events:
            handler = _HANDLERS.get(type(ev))
            if handler is not None:
                cost = handler(self, ev, cost)
        if events and self._waiter is not None:
            self._waiter.set()
            self._waiter = None

    def _on_data(self, ev: P.StreamData, cost: str | None) -> None:
        out = self._outputs.get(ev.stream_id)
        event = OutputData(
            output=out[0] if out else None, stream_id=ev.stream_id, value=ev.value, wire=ev.wire
        )
        if self.abandoned:
            self._queue(event, cost)
        else:
            self.events.append((event, cost))  # _queue, inlined on the per-chunk path

    def _on_item(self, ev: P.StreamItem, cost: str | None) -> None:
        out = self._outputs.get(ev.stream_id)
        self._queue(
            OutputItem(
                output=out[0] if out else None, stream_id=ev.stream_id, value=ev.value, meta=ev.meta
            ),
            cost,
        )

    def _on_opened(self, ev: P.StreamOpened, cost: str | None) -> str | None:
        self._outputs[ev.stream_id] = (ev.output, ev.media_urn, ev.is_sequence)
        if not self.abandoned:
            event = OutputStarted(
                output=ev.output,
                stream_id=ev.stream_id,
                media_urn=ev.media_urn,
                is_sequence=ev.is_sequence,
                unbounded=ev.unbounded,
                meta=ev.meta,
            )
            self.events.append((event, None))
        return cost

    def _on_closed(self, ev: P.StreamClosed, cost: str | None) -> str | None:
        if not self.abandoned:
            out = self._outputs.get(ev.stream_id)
            event = OutputEnded(
                output=out[0] if out else None, stream_id=ev.stream_id, chunk_count=ev.chunk_count
            )
            self.events.append((event, None))
        return cost

    def _on_end(self, ev: P.BodyEnded, cost: str | None) -> str | None:
        self.end_meta = ev.meta
        self._finish(None)
        return cost

    def _on_error(self, ev: P.ErrorReport, cost: str | None) -> str | None:
        self._finish(
            CallError(
                ev.code or ErrorCode.HANDLER_ERROR,
                ev.attribution_class or AttributionClass.INTERNAL,
                ev.message,
                ev.arg_urn,
            )
        )
        return cost

    def on_death(self, error: CallError) -> None:
        if self.done:
            return
        if self.cancel_requested:
            error = CallError(
                ErrorCode.CANCELLED,
                AttributionClass.USER,
                f"Cancelled by user (cartridge {self.conn.name} was killed)",
            )
        self._finish(error)

    def _finish(self, error: CallError | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        self._queued = None
        if self._sender is not None:
            self._sender.stop()
        self.conn.forget(self.rid)
        if self._chain is not None:
            self.conn.gate.release(self._chain)
            self._chain = None
        if self._waiter is not None:
            self._waiter.set()
            self._waiter = None
        if self._ended is not None:
            self._ended.set()
        if self.observation is not None:
            self.observation.finished(error, self.bytes_out)

    # -- caller side -----------------------------------------------------------------------

    def take_queued(self) -> CallEvent:
        """The next queued event, without a coroutine (only while :attr:`events` is not
        empty); its credit is granted back as :meth:`next_event` would."""
        ev, credit_stream = self.events.popleft()
        if credit_stream is not None and not self.done:
            self.credit_back(credit_stream)
        return ev

    def credit_back(self, stream_id: str) -> None:
        """The caller took a data event of ``stream_id`` (from :attr:`events`, while the call
        runs): its credit goes back, in a CREDIT when a batch is due."""
        receiver = self.receiver
        receiver.consumed(stream_id)
        credits = receiver.data_to_send()
        if credits:
            for credit in credits:
                self.conn.send(credit)

    async def next_event(self, stop: bool = False) -> CallEvent | None:
        """The next event, ``None`` after END (with ``stop``: :class:`StopAsyncIteration`, as
        the response's iterator ends).

        :raises CallError: on ERR or death; :class:`CallTimeout` past the deadline.
        """
        deadline = self.deadline
        if deadline is not None and not self.done and anyio.current_time() >= deadline:
            self.expire()
        while not self.events:
            if self.done:
                if self.error is not None:
                    raise self.error
                if stop:
                    raise StopAsyncIteration
                return None
            receiver = self.receiver
            receiver.flush_credit()
            credits = receiver.data_to_send()
            if credits:
                for credit in credits:
                    self.conn.send(credit)
            waiter = self._waiter = self.conn.new_wake()
            if deadline is None:
                await waiter.wait()
            else:
                with anyio.CancelScope(deadline=deadline) as scope:
                    await waiter.wait()
                if scope.cancelled_caught and not self.done:
                    self.expire()
        return self.take_queued()

    def expire(self) -> None:
        """The caller's timeout ran out: cancel the call on the wire and fail it now."""
        self.end_now(
            CallTimeout(
                f"the call to {self.cap} did not finish within its timeout of {self.timeout:g} s"
            ),
            "the caller's timeout ran out",
        )

    def expire_inactive(self, limit: float) -> None:
        """No frame came for ``limit`` seconds: cancel the call and fail it now (HST-20)."""
        self.end_now(
            CallTimeout(
                f"the call to {self.cap} timed out: no activity for {limit:g} s "
                f"(cartridge {self.conn.name} sent no frame for it)"
            ),
            f"no activity for {limit:g} s",
        )

    def end_now(self, error: CallError, reason: str) -> None:
        """Cancel the call on the wire (a CANCEL with ``error``'s code and class, ``reason``
        its message) and fail it with ``error`` at once, without waiting for the cartridge."""
        if self.done:
            return
        self.events.clear()
        self.cancel(code=error.code, attribution_class=error.attribution_class, message=reason)
        if self.done:  # nothing had been sent yet: cancel() already failed it
            self.error = error
        else:
            self._finish(error)

    def cancel(
        self,
        *,
        force_kill: bool = False,
        code: str = ErrorCode.CANCELLED,
        attribution_class: str = AttributionClass.USER,
        message: str = "Cancelled by user",
    ) -> None:
        if self.done or self.cancel_requested:
            return
        self.cancel_requested = True
        if self._sender is not None:
            self._sender.stop()
        queued = self._queued
        if queued is not None and self.conn.withdraw(*queued):
            # Nothing of the call reached the pipe: the cartridge never hears of it.
            if self._sender is not None:
                self.conn.forget_flow(self.rid, self.xid)  # its REQ was numbered
            self._finish(CallError(code, attribution_class, f"{message} (before it was sent)"))
            return
        self.conn.send(
            frames.cancel(
                self.rid,
                force_kill=force_kill,
                code=code,
                attribution_class=attribution_class,
                message=message,
                xid=self.xid,
            )
        )
        self.conn.spawn(self._cancel_timer, force_kill)

    async def _cancel_timer(self, force_kill: bool) -> None:
        """Wait up to the cancel grace for the call's end; then kill, or fail it locally."""
        if not self.done:
            self._ended = anyio.Event()
            with anyio.move_on_after(self._cancel_grace):
                await self._ended.wait()
        if self.done:
            return
        if force_kill:
            self.conn.kill(f"killed by the engine: cancel(force_kill=True) of a call to {self.cap}")
            return
        self._finish(
            CallError(
                ErrorCode.CANCELLED,
                AttributionClass.USER,
                f"Cancelled by user (cartridge {self.conn.name} did not confirm the cancel "
                f"within {self._cancel_grace:g} s)",
            )
        )

    def abandon(self) -> None:
        """The caller left without reading to the end: cancel and discard the rest."""
        if self.done:
            return
        self.abandoned = True
        self.events.clear()
        self.cancel(message="the caller abandoned the call")


#: Event type -> handler(state, event, cost) returning the chunk's credit cost still unspent
#: (the data handlers return ``None``: their event carries it).
_HANDLERS: dict[type, Any] = {
    P.StreamData: CallState._on_data,
    P.StreamItem: CallState._on_item,
    P.StreamOpened: CallState._on_opened,
    P.StreamClosed: CallState._on_closed,
    P.ProgressReceived: CallState._on_progress,
    P.LogReceived: CallState._on_log,
    P.BodyEnded: CallState._on_end,
    P.ErrorReport: CallState._on_error,
}

# The four frames of a plain response routed, received and queued in one C call (when built).
P.compile_response_path(CallState, (OutputStarted, OutputData, OutputEnded))
#: Makes a call's response receiver (compiled once the path above is registered).
_new_receiver = P.receiver_factory()
