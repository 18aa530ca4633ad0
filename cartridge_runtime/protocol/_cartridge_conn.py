"""The cartridge side of one connection, sans-IO: every protocol decision a cartridge makes.

:class:`CartridgeConnection` is fed the frames the host sends (:meth:`~CartridgeConnection.
receive`) and answers with an event for the runtime and frames to send (its :attr:`outbox`).
It decides the handshake (HSK-2), POLICY (HSK-19), the refusal of relay frames (TYP-10), the
admission of a REQ by an ordered rule table (:data:`REQ_RULES`) and through the pool table,
the routing of every frame to its request, peer call or control handler, CREDIT routing,
CANCEL of queued and running requests (FLW-17..FLW-20), and the terminal of every request
(:meth:`~CartridgeConnection.terminal`: a cancel beats an input error, which beats the
handler's ERR, which beats END; REQ-27). It never does IO and never waits: the runtime's
session moves the bytes, runs the handlers and acts on the events.

The per-frame path is one dict lookup of the frame type in the table of the current
:class:`~._conn_state.ConnState`, then one dict lookup of the request id.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Generic, TypeVar

from . import _builders as frames
from . import _request_state
from ._cartridge_admission import REQ_RULES as REQ_RULES  # re-exported by the package
from ._cartridge_admission import no_rule_applies, refusal_frame
from ._cartridge_state import (
    PHASE_TRANSITIONS,
    Admission,
    Cancelled,
    CloseInputs,
    CloseReason,
    ConnectionClosed,
    ConnEvent,
    CreditSink,
    HandlerTable,
    Handshaken,
    HeartbeatProbe,
    InputFailed,
    Notice,
    PeerRoute,
    PeerSink,
    PoolSchedule,
    RequestPhase,
    ServedRequest,
    new_admitted,
    new_served_request,
    terminal_frame,
)
from ._conn_state import ConnState
from ._constants import AttributionClass, ErrorCode, FrameType
from ._errors import HandshakeError, LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import BodyEnded, ErrorReport, StreamData, StreamItem, StreamOpened
from ._frame import ZERO_ID, Frame, MessageId
from ._handshake import accept_host_hello
from ._limits import Limits
from ._seq import SeqAssigner
from ._verbs import NoEvent, WireBytes

H = TypeVar("H")


class CartridgeConnection(Generic[H]):
    """The cartridge side of one connection (see the module docstring).

    :param limits: the limits this side proposes in HELLO.
    :param handlers: the cartridge's registrations (``H`` is whatever makes a handler).
    :param pools: the pool table that admits requests.
    :param manifest: the manifest JSON sent in HELLO.
    :param max_open_requests: most requests open at once (running or queued).
    """

    def __init__(
        self,
        *,
        limits: Limits,
        handlers: HandlerTable[H],
        pools: PoolSchedule[ServedRequest[H]],
        manifest: bytes,
        max_open_requests: int,
    ) -> None:
        self.state = ConnState.STARTING
        self.limits = limits
        self.handlers = handlers
        self.pools = pools
        self.manifest = manifest
        self.max_open_requests = max_open_requests
        #: The network policy word of the last POLICY (``None`` before the first).
        self.policy: str | None = None
        #: Open incoming requests (queued or running), by request id.
        self.requests: dict[MessageId, ServedRequest[H]] = {}
        #: Open outgoing peer calls, by their request id.
        self.peer_calls: dict[MessageId, PeerRoute] = {}
        #: Frames decided while receiving, for the runtime to send (in order) and clear.
        self.outbox: list[Frame] = []
        #: The seq of every frame sent to the host (TYP-3..TYP-6), stragglers counted.
        self.seq = SeqAssigner()
        self._wire = WireBytes(self.seq, self._max_frame)
        self._pool_names: dict[str, str] = {}
        serving: dict[FrameType, Callable[[Frame], ConnEvent]] = {
            FrameType.REQ: self._on_req,
            FrameType.HEARTBEAT: self._on_heartbeat,
            FrameType.CREDIT: self._on_credit,
            FrameType.CANCEL: self._on_cancel,
            FrameType.CLOSE_STREAM: self._on_close_stream,
            FrameType.POLICY: self._on_policy,
            FrameType.HELLO: self._on_late_hello,
            FrameType.RELAY_NOTIFY: self._on_relay,
            FrameType.RELAY_STATE: self._on_relay,
        }
        for ft in (
            FrameType.STREAM_START,
            FrameType.CHUNK,
            FrameType.STREAM_END,
            FrameType.END,
            FrameType.ERR,
            FrameType.LOG,
        ):
            serving[ft] = self._on_flow
        if _request_state._c_serve_flow is not None:
            # Compiled: a frame of an open request that the receiver's fast path takes
            # whole is served in one C call; anything else goes to _on_flow.
            fast = functools.partial(_request_state._c_serve_flow, self.requests, self._on_flow)
            for ft in (
                FrameType.STREAM_START,
                FrameType.CHUNK,
                FrameType.STREAM_END,
                FrameType.END,
            ):
                serving[ft] = fast
        closed: dict[FrameType, Callable[[Frame], ConnEvent]] = {
            ft: self._ignore for ft in FrameType
        }
        self._tables: dict[ConnState, dict[FrameType, Callable[[Frame], ConnEvent]]] = {
            ConnState.STARTING: {ft: self._on_hello for ft in FrameType},
            ConnState.READY: serving,
            ConnState.DEAD: closed,
        }
        self._table = self._tables[self.state]

    def __repr__(self) -> str:
        return (
            f"CartridgeConnection(state={self.state.name}, requests={len(self.requests)}, "
            f"peer_calls={len(self.peer_calls)})"
        )

    # -- states -------------------------------------------------------------------------------

    def _move(self, state: ConnState) -> None:
        if state not in PHASE_TRANSITIONS[self.state]:
            raise LocalProtocolError(f"connection cannot go from {self.state.name} to {state.name}")
        self.state = state
        self._table = self._tables[state]

    def close(self, reason: CloseReason, message: str) -> ConnectionClosed:
        """End the connection (idempotent): frames received from now on are ignored."""
        if self.state is not ConnState.DEAD:
            self._move(ConnState.DEAD)
        return ConnectionClosed(reason, message)

    # -- bytes in, events out, bytes to send (the verbs every core shares) -------------------

    def _max_frame(self) -> int:
        return self.limits.max_frame

    def receive_data(self, data: bytes) -> None:
        """Feed bytes the host wrote; ``b""`` means it closed its side.

        :raises ProtocolError: an earlier block was not valid frames.
        """
        self._wire.feed(data)

    def next_event(self) -> ConnEvent | NoEvent:
        """The next event the bytes fed so far make for the runtime, or ``NEED_DATA`` /
        ``PEER_CLOSED``. The frames the core decides to send (HELLO first, then
        :attr:`outbox`) are queued for :meth:`data_to_send` on the way.

        :raises ProtocolError: the bytes are not valid frames (also an end inside one).
        """
        wire = self._wire
        while (frame := wire.next_frame()) is not None:
            event = self.receive(frame)
            if isinstance(event, Handshaken):
                wire.queue(event.hello)
            self._queue_outbox()
            if event is not None:
                return event
        return wire.end()

    def send(self, frame: Frame) -> None:
        """Queue a frame for the host (a handler's output, a peer call), numbered by
        :attr:`seq`; a straggler is dropped and counted.

        :raises FrameEncodeError: the frame does not fit max_frame.
        """
        self._queue_outbox()
        self._wire.queue(frame)

    def data_to_send(self) -> bytes:
        """Every byte queued to send since the last call (:attr:`outbox` included), in order."""
        self._queue_outbox()
        return self._wire.take()

    def _queue_outbox(self) -> None:
        outbox = self.outbox
        if outbox:
            for frame in outbox:
                self._wire.queue(frame)
            outbox.clear()

    # -- input --------------------------------------------------------------------------------

    def receive(self, frame: Frame) -> ConnEvent:
        """Take one frame from the host: what it means for the runtime (frames to send are
        appended to :attr:`outbox`). Never raises for anything the host sends."""
        return self._table[frame.frame_type](frame)

    def _ignore(self, frame: Frame) -> ConnEvent:
        return None

    def _on_hello(self, frame: Frame) -> ConnEvent:
        try:
            limits = accept_host_hello(frame, self.limits)
        except HandshakeError as exc:
            return self.close(CloseReason.HANDSHAKE_FAILED, f"handshake failed: {exc}")
        self.limits = limits
        self._move(ConnState.READY)
        hello = frames.hello(limits, manifest=self.manifest, pools=self.pools.to_json_bytes())
        return Handshaken(limits, hello)

    def _on_late_hello(self, frame: Frame) -> ConnEvent:
        self.outbox.append(
            frames.err(
                ZERO_ID,
                ErrorCode.PROTOCOL_ERROR,
                "HELLO after the handshake",
                AttributionClass.INTERNAL,
            )
        )
        return None

    def _on_relay(self, frame: Frame) -> ConnEvent:
        return self.close(  # TYP-10
            CloseReason.RELAY_FRAME,
            f"{frame.frame_type.name} frame received: a cartridge never takes part in relay "
            "traffic; exiting",
        )

    def _on_policy(self, frame: Frame) -> ConnEvent:
        self.policy = str((frame.meta or {}).get("network"))  # HSK-19
        return None

    # -- requests -----------------------------------------------------------------------------

    def _on_req(self, frame: Frame) -> ConnEvent:
        for outcome, applies in () if no_rule_applies(self, frame) else REQ_RULES:
            if applies(self, frame):
                return self._refused(frame, outcome)
        cap = frame.cap or ""
        found = self.handlers.find_handler(cap)
        if found is None:
            return self._refused(frame, Admission.NO_HANDLER)
        handler_urn, handler = found
        pool = self._pool_names.get(handler_urn)
        if pool is None:
            pool = self._pool_names[handler_urn] = self.handlers.pool_name(handler_urn)
        request: ServedRequest[H] = new_served_request(
            frame.id, frame.routing_id, cap, handler_urn, handler, pool, self.limits.initial_credit
        )
        request.receiver.receive(frame)
        self.requests[frame.id] = request
        position = self.pools.arrive(pool, request)
        if position is None:
            request.phase = RequestPhase.RUNNING
            return new_admitted(request, False)
        self.outbox.append(  # REQ-37
            frames.log(
                request.rid,
                "queued",
                f"Request queued (position {position} on pool '{pool}')",
                AttributionClass.INTERNAL,
                xid=request.xid,
            )
        )
        return new_admitted(request, True)

    def _refused(self, frame: Frame, outcome: Admission) -> ConnEvent:
        if outcome is Admission.DUPLICATE:
            return self.fail_input(
                self.requests[frame.id],
                RemoteProtocolError(f"second REQ for request {frame.id}"),
            )
        self.outbox.append(refusal_frame(frame, outcome, self.max_open_requests))
        return None

    def _on_flow(self, frame: Frame) -> ConnEvent:
        request = self.requests.get(frame.id)
        if request is None:
            route = self.peer_calls.get(frame.id)
            if route is not None:
                self._on_peer_frame(route, frame)
            return None  # HSK-20: frames of a refused or finished request produce nothing
        if request.input_error is not None:
            return None
        try:
            events = request.receiver.receive(frame)
        except ProtocolError as exc:
            return self.fail_input(request, exc)
        for ev in events:
            if type(ev) is StreamOpened and ev.output is not None:
                return self.fail_input(
                    request,
                    RemoteProtocolError(f"argument stream {ev.stream_id!r} carries an output name"),
                )
            if type(ev) is ErrorReport:
                # The requester failed: the request ends without a terminal of ours.
                reason = ErrorReport(
                    code=ev.code or ErrorCode.CANCELLED,
                    attribution_class=ev.attribution_class,
                    message=ev.message or "requester failed",
                )
                self.abandon(request, reason, silent=True)
        if request.receiver.has_data_to_send:
            self.outbox += request.receiver.data_to_send()
        return events

    def fail_input(self, request: ServedRequest[H], error: ProtocolError) -> ConnEvent:
        """Request ``request`` broke a rule: its input fails with ``error`` and it ends with an
        ERR of the error's code. A queued request is answered here (ERR in the outbox)."""
        if request.input_error is not None:
            return None
        request.input_error = error
        if not request.started:
            self._drop_queued(request)
            request.terminal_sent = True
            self.outbox.append(terminal_frame(request, None))
        return InputFailed(request.rid, error)

    def _drop_queued(self, request: ServedRequest[H]) -> None:
        self.pools.remove_queued(lambda item: item is request)
        self.requests.pop(request.rid, None)
        request.phase = RequestPhase.DONE

    def _on_peer_frame(self, route: PeerRoute, frame: Frame) -> None:
        sink = route.sink
        try:
            events = route.receiver.receive(frame)
        except ProtocolError as exc:
            sink.deliver(exc)
            self.peer_calls.pop(route.rid, None)
            return
        first = events[0] if events else None
        for ev in events:
            kind = type(ev)
            sink.deliver(ev, 1 if kind is StreamData or (kind is StreamItem and ev is first) else 0)
            if kind is BodyEnded or kind is ErrorReport:
                self.peer_calls.pop(route.rid, None)
        if route.receiver.has_data_to_send:
            self.outbox += route.receiver.data_to_send()

    # -- control frames -----------------------------------------------------------------------

    def _on_heartbeat(self, frame: Frame) -> ConnEvent:
        desired = (frame.meta or {}).get("desired_capacities")
        admitted: tuple[ServedRequest[H], ...] = ()
        if desired is not None:
            try:
                self.pools.apply_desired_json(desired)
            except ValueError as exc:
                self.outbox.append(
                    frames.err(
                        frame.id, ErrorCode.UNKNOWN_POOL, str(exc), AttributionClass.INTERNAL
                    )
                )
                return None
            admitted = self.admit_waiting()
        return HeartbeatProbe(frame.id, admitted)

    def heartbeat_reply(
        self, hid: MessageId, *, drops: int, stragglers: int, overruns: int
    ) -> Frame:
        """The reply to a HEARTBEAT, with the writer's counters and the pools (FLW-13)."""
        meta = {
            "drops_total": drops,
            "stragglers_total": stragglers,
            "overruns_total": overruns,
            "pools": self.pools.to_json_bytes(),
        }
        return frames.heartbeat(hid, meta=meta)

    def _on_credit(self, frame: Frame) -> ConnEvent:
        n = frame.credit or 0
        request = self.requests.get(frame.id)
        outputs: dict[str, CreditSink] | None = None
        if request is not None:
            outputs = request.outputs
        else:
            route = self.peer_calls.get(frame.id)
            if route is not None:
                outputs = route.outputs
        if outputs is None:
            return None  # a grant after a terminal is a harmless no-op
        if frame.stream_id is not None:
            out = outputs.get(frame.stream_id)
            if out is not None:
                out.grant(n)
            return None
        if len(outputs) == 1:
            for out in outputs.values():
                out.grant(n)
        elif outputs:
            return Notice(
                f"CREDIT without a stream id for request {frame.id} with {len(outputs)} "
                "streams; ignored"
            )
        return None

    def _on_cancel(self, frame: Frame) -> ConnEvent:
        request = self.requests.get(frame.id)
        if request is None:  # FLW-19
            return Notice(f"CANCEL for unknown or finished request {frame.id}; ignored")
        if request.cancel is not None:
            return Notice(f"second CANCEL for request {frame.id}; ignored")
        running = self.cancel(request, ErrorReport.for_cancel(frame.meta))
        if not frame.force_kill:
            return Cancelled(request.rid, running)
        # FLW-20: the cancel's ERR first, then the process ends.
        if not request.terminal_sent:
            request.terminal_sent = True
            self.outbox.append(terminal_frame(request, None))
        closed = self.close(
            CloseReason.FORCE_KILLED,
            f"CANCEL with force_kill for request {frame.id}; ending the process",
        )
        return Cancelled(request.rid, running, closed)

    def cancel(self, request: ServedRequest[H], reason: ErrorReport) -> bool:
        """The host cancelled ``request`` with ``reason`` (the first reason stays). A queued
        request is taken out of line and answered here, its message marked ``(while
        queued)`` (FLW-17); a running one gets its peer calls cancelled (FLW-18) and the
        runtime cancels its handler, whose terminal is then the cancel's ERR.

        :returns: whether the request's handler is running (and must be cancelled).
        """
        if request.cancel is None:
            request.cancel = reason
        if not request.started:
            self._drop_queued(request)
            if not request.terminal_sent:
                request.terminal_sent = True
                cancel = request.cancel
                self.outbox.append(
                    frames.err(
                        request.rid,
                        cancel.code,
                        f"{cancel.message} (while queued)",
                        cancel.attribution_class,
                        xid=request.xid,
                    )
                )
            return False
        for pid in request.peer_ids:
            cancel_frame = self.peer_cancel_frame(request, pid)
            if cancel_frame is not None:
                self.outbox.append(cancel_frame)
        return request.phase is RequestPhase.RUNNING

    def abandon(
        self, request: ServedRequest[H], reason: ErrorReport, *, silent: bool = False
    ) -> bool:
        """This side gives ``request`` up with ``reason`` (input closed, shutting down, the
        requester's ERR; the first reason stays). A queued request just leaves the line;
        ``silent``: no terminal is sent at all (the requester already failed).

        :returns: whether the request's handler is running (and must be cancelled).
        """
        if request.cancel is None:
            request.cancel = reason
        if silent:
            request.terminal_sent = True
        if not request.started:
            self._drop_queued(request)
            return False
        return request.phase is RequestPhase.RUNNING

    def _on_close_stream(self, frame: Frame) -> ConnEvent:
        if frame.id not in self.requests:
            return Notice(f"CLOSE_STREAM for unknown request {frame.id}; ignored")
        return CloseInputs(frame.id, frame.stream_id)

    # -- what the runtime tells the connection ------------------------------------------------

    def dequeued(self, request: ServedRequest[H]) -> Frame:
        """The LOG that announces a request the pools admitted from the queue (REQ-37)."""
        return frames.log(
            request.rid,
            "dequeued",
            "Request dequeued, handler starting",
            AttributionClass.INTERNAL,
            xid=request.xid,
        )

    def admit_waiting(self) -> tuple[ServedRequest[H], ...]:
        """The queued requests the pools admit now (each is running from here on)."""
        admitted: list[ServedRequest[H]] = []
        while (item := self.pools.admit_next()) is not None:
            request = item[1]
            request.phase = RequestPhase.RUNNING
            admitted.append(request)
        return tuple(admitted)

    def terminal(
        self,
        request: ServedRequest[H],
        failure: ErrorReport | None,
        progress: float = 1.0,
        message: str | None = None,
    ) -> Frame | None:
        """The terminal to send for a request whose handler returned (``failure``: the ERR
        its error asks for), or ``None`` when one was sent already (:func:`terminal_frame`)."""
        if request.terminal_sent:
            return None
        request.terminal_sent = True
        return terminal_frame(request, failure, progress, message)

    def finish(self, request: ServedRequest[H]) -> tuple[ServedRequest[H], ...]:
        """A running request's handler is done: free its pool slot; returns the queued
        requests that the freed slot admits. Each peer call it left open gets a CANCEL in the
        outbox (unless the parent's CANCEL sent one) and is forgotten: its response may never
        come, and late frames for it are ignored as for any unknown id."""
        if self.requests.get(request.rid) is request:
            del self.requests[request.rid]
        if request.peer_ids:
            self._end_peer_calls(request)
        if request.phase is RequestPhase.RUNNING:
            request.phase = RequestPhase.DONE
            with contextlib.suppress(ValueError, RuntimeError):  # a table changed under us
                self.pools.release(request.pool)
        request.outputs.clear()
        return self.admit_waiting()

    def fail_all(self, message: str) -> list[ServedRequest[H]]:
        """The input broke (FRM-21): every open request ends with ERR ``PROTOCOL_ERROR``
        (class ``internal``); queued ones are answered here. Returns the running ones, whose
        handlers the runtime cancels."""
        reason = ErrorReport(
            code=ErrorCode.PROTOCOL_ERROR,
            attribution_class=AttributionClass.INTERNAL,
            message=message,
        )
        running = []
        for request in list(self.requests.values()):
            if request.started:
                self.abandon(request, reason)
                running.append(request)
                continue
            self._drop_queued(request)
            if not request.terminal_sent:
                request.terminal_sent = True
                request.cancel = request.cancel or reason
                self.outbox.append(terminal_frame(request, None))
        return running

    def connection_error(self, error: ProtocolError) -> Frame:
        """The ERR about the connection itself, on id 0 (ERR-7, FRM-21)."""
        return frames.err(ZERO_ID, ErrorCode.PROTOCOL_ERROR, str(error), AttributionClass.INTERNAL)

    # -- peer calls ---------------------------------------------------------------------------

    def open_peer_call(self, parent: ServedRequest[H], sink: PeerSink) -> PeerRoute:
        """Register an outgoing peer call of ``parent``; send ``frames.req(route.rid, cap)``."""
        route = PeerRoute(MessageId.new(), parent.rid, sink, self.limits.initial_credit)
        self.peer_calls[route.rid] = route
        parent.peer_ids.append(route.rid)
        return route

    def _end_peer_calls(self, parent: ServedRequest[H]) -> None:
        peer_calls = self.peer_calls
        for rid in parent.peer_ids:
            route = peer_calls.pop(rid, None)
            if route is not None and not route.cancel_sent:
                self.outbox.append(self._peer_cancel(parent, rid))
        parent.peer_ids.clear()

    def peer_cancel_frame(self, parent: ServedRequest[H], rid: MessageId) -> Frame | None:
        """The CANCEL for peer call ``rid`` of ``parent`` (with the parent's cancel reason, if
        any), or ``None`` when the call is over."""
        route = self.peer_calls.get(rid)
        if route is None:
            return None
        route.cancel_sent = True
        return self._peer_cancel(parent, rid)

    def _peer_cancel(self, parent: ServedRequest[H], rid: MessageId) -> Frame:
        reason = parent.cancel
        if reason is None:
            return frames.cancel(rid)
        return frames.cancel(
            rid,
            code=reason.code,
            attribution_class=reason.attribution_class,
            message=reason.message,
        )
