"""One CBOR-mode connection: handshake, the read loop, dispatch, the writer task, shutdown.

Theory of operation
-------------------
The *reader* decodes frames and acts on each one at once, without waiting for anything:
HEARTBEAT, CREDIT, CANCEL, CLOSE_STREAM and POLICY are answered or applied in place; a REQ
creates an :class:`Active` request, admitted through the pool table into its own handler task;
the request's other frames go through its :class:`BodyReceiver` into its input mailboxes (never
blocking: credit bounds what can pile up). Every outgoing frame, from any task, goes through one
bounded queue to the *writer* (:mod:`._writer`), which assigns seq numbers (dropping
stragglers), encodes, and sends whatever is queued as one write.

Dispatch is synchronous: the replies it sends are queued even past the writer's bound, and
the reader takes no further frame while the queue is over it. So on asyncio, with the stdin
stream of :mod:`._stdin`, the whole read path runs inside the event loop's reader callback:
read, decode and dispatch, with no task switch and no coroutine per frame. Elsewhere (trio, or
any other byte stream) a task runs the same steps. The read side lives in :mod:`._reader`.

Exit statuses: 0 at EOF (running handlers get a short grace, then are cancelled), 1 for a
handshake failure or a relay frame, 65 when the byte stream can no longer be trusted, 137 after
a CANCEL with force_kill. Each non-zero exit prints one ``cartridge: ...`` line to stderr.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from cartridge_runtime.manifest import UnknownPoolError
from cartridge_runtime.protocol import (
    ZERO_ID,
    BodyEnded,
    ErrorCode,
    ErrorReport,
    Frame,
    FrameDecoder,
    FrameType,
    HandshakeError,
    Limits,
    MessageId,
    ProtocolError,
    StreamAbandonedError,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
    accept_host_hello,
    encode_frame,
    frames,
)
from cartridge_runtime.urn import CapUrn, UrnError

from ._handlers import HandlerRunner, cancel_terminal
from ._input import InputStream
from ._reader import InputReader
from ._runtime import EXIT_FAILURE, EXIT_FORCE_KILLED, EXIT_OK, EXIT_PROTOCOL
from ._wire import Active, PeerState, peer_cancel_frame
from ._writer import FrameWriter

if TYPE_CHECKING:
    from ._runtime import CartridgeRuntime

#: Smallest byte value whose CHUNK wire form is kept for pass-through (see ``WireOutput``).
PASS_THROUGH_MIN = 4096
#: Seconds running handlers may take to finish after stdin EOF before they are cancelled.
EOF_GRACE = 2.0

_IDENTITY = CapUrn.parse("cap:effect=none")


def _note(message: str) -> None:
    print(f"cartridge: {message}", file=sys.stderr, flush=True)


class _Stop(Exception):
    """Ends the read loop with an exit status."""

    def __init__(self, status: int) -> None:
        self.status = status


class Session(HandlerRunner, InputReader):
    """The cartridge side of one connection (see the module docstring)."""

    def __init__(
        self,
        runtime: CartridgeRuntime,
        receive: anyio.abc.ByteReceiveStream,
        send: anyio.abc.ByteSendStream,
    ) -> None:
        self.runtime = runtime
        self.receive_stream = receive
        self.send_stream = send
        self.decoder = FrameDecoder()
        self.limits: Limits = runtime.limits
        self.policy: str | None = None
        self.writer = FrameWriter(send, lambda: self.limits.max_frame)
        self.active: dict[MessageId, Active] = {}
        self.peer_calls: dict[MessageId, PeerState] = {}
        self.pools: Any = None
        self.overruns = 0
        self._tg: anyio.abc.TaskGroup | None = None
        self._idle = anyio.Event()
        #: Per-cap work done once per session: pool name per handler URN, output specs per
        #: (request URN, handler URN) with the cap definition they come from.
        self._pool_names: dict[str, str] = {}
        self.spec_cache: dict[tuple[str, str], tuple[list[Any], Any]] = {}
        self._init_workers()

    # -- output ------------------------------------------------------------------------------

    async def send(self, frame: Frame) -> None:
        """Queue one frame for the writer (see :mod:`._writer`: no yield while there is room)."""
        await self.writer.send(frame)

    def push(self, frame: Frame) -> None:
        """Queue one frame at once (dispatch's replies: see the module docstring)."""
        self.writer.push(frame)

    @property
    def drops(self) -> int:
        """Frames dropped: not queueable, not encodable, or not writable."""
        return self.writer.drops

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until EOF or a fatal condition; return the exit status."""
        self._bind_backend()
        try:
            self.pools = self.runtime.make_pools()
        except ValueError as exc:
            _note(f"cannot serve: the pool declarations do not fit the registered handlers: {exc}")
            return EXIT_FAILURE
        try:
            first = await self._next_frame()
        except ProtocolError as exc:
            _note(f"protocol error: {exc}")
            return EXIT_PROTOCOL
        if first is None:
            return EXIT_OK
        try:
            self.limits = accept_host_hello(first, self.runtime.limits)
        except HandshakeError as exc:
            _note(f"handshake failed: {exc}")
            return EXIT_FAILURE
        self.decoder.max_frame = self.limits.max_frame
        hello = frames.hello(
            self.limits,
            manifest=self.runtime.manifest.to_json_bytes(),
            pools=self.pools.to_json_bytes(),
        )
        try:
            await self.send_stream.send(encode_frame(hello))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            _note(f"cannot write HELLO: {exc}")
            return EXIT_FAILURE
        status = EXIT_OK
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self.writer.run)
            try:
                status = await self._read_loop()
            except _Stop as stop:
                status = stop.status
            except ProtocolError as exc:
                _note(f"protocol error: {exc}")
                status = EXIT_PROTOCOL
                # FRM-21: every request still open ends with ERR PROTOCOL_ERROR, and the host
                # hears why on id 0 (no request owns it), before the cartridge goes away.
                self._fail_open_requests(f"the host's byte stream broke: {exc}")
                with anyio.move_on_after(1):
                    await self.send(
                        frames.err(ZERO_ID, ErrorCode.PROTOCOL_ERROR, str(exc), "internal")
                    )
            await self._shutdown(graceful=status == EXIT_OK)
            self.writer.close()
            with anyio.move_on_after(10):
                await self.writer.done.wait()
            tg.cancel_scope.cancel()
        return status

    def _fail_open_requests(self, message: str) -> None:
        """End every open request with ERR ``PROTOCOL_ERROR`` (class ``internal``): a running
        handler is cancelled with that reason (its terminal is that ERR), a queued request is
        answered here."""
        reason = (str(ErrorCode.PROTOCOL_ERROR), "internal", message)
        for a in list(self.active.values()):
            if a.started:
                self._cancel(a, reason)
                continue
            self.pools.remove_queued(lambda item, a=a: item is a)
            self.active.pop(a.rid, None)
            if not a.terminal_sent:
                a.terminal_sent = True
                a.cancel = a.cancel or reason
                code, cls, text = a.cancel
                self.push(frames.err(a.rid, code, text, cls, xid=a.xid))

    async def _shutdown(self, *, graceful: bool) -> None:
        """Stop every request: at EOF, give complete requests a short grace first."""
        for a in list(self.active.values()):
            if not a.receiver.finished:
                self._cancel(
                    a, ("CANCELLED", "environment", "input closed before the request was complete")
                )
        if graceful and self.active:
            with anyio.move_on_after(EOF_GRACE):
                while self.active:
                    self._idle = anyio.Event()
                    await self._idle.wait()
        for a in list(self.active.values()):
            self._cancel(a, ("CANCELLED", "environment", "the cartridge is shutting down"))
        with anyio.move_on_after(EOF_GRACE):
            while any(x.started for x in self.active.values()):
                self._idle = anyio.Event()
                await self._idle.wait()

    # -- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, frame: Frame) -> None:
        ft = frame.frame_type
        if ft is FrameType.REQ:
            self._on_req(frame)
        elif ft in (
            FrameType.STREAM_START,
            FrameType.CHUNK,
            FrameType.STREAM_END,
            FrameType.END,
            FrameType.ERR,
            FrameType.LOG,
        ):
            a = self.active.get(frame.id)
            if a is not None:
                self._on_body(a, frame)
            elif frame.id in self.peer_calls:
                self._on_peer_frame(self.peer_calls[frame.id], frame)
        elif ft is FrameType.HEARTBEAT:
            self._on_heartbeat(frame)
        elif ft is FrameType.CREDIT:
            self._on_credit(frame)
        elif ft is FrameType.CANCEL:
            self._on_cancel(frame)
        elif ft is FrameType.CLOSE_STREAM:
            self._on_close_stream(frame)
        elif ft is FrameType.POLICY:
            self.policy = str((frame.meta or {}).get("network"))
        elif ft is FrameType.HELLO:
            self.push(
                frames.err(ZERO_ID, "PROTOCOL_ERROR", "HELLO after the handshake", "internal")
            )
        elif ft in (FrameType.RELAY_NOTIFY, FrameType.RELAY_STATE):
            _note(
                f"{ft.name} frame received: a cartridge never takes part in relay traffic; exiting"
            )
            raise _Stop(EXIT_FAILURE)

    def _reject(self, frame: Frame, code: str, message: str, cls: str = "internal") -> None:
        self.push(frames.err(frame.id, code, message, cls, xid=frame.routing_id))

    def _on_req(self, frame: Frame) -> None:
        cap = frame.cap
        if frame.id in self.active:
            a = self.active[frame.id]
            self._fail_input(a, ProtocolError(f"second REQ for request {frame.id}"))
            return
        if cap is None:
            self._reject(frame, "INVALID_REQUEST", "REQ without a cap URN (key 10)")
            return
        if frame.payload:
            self._reject(
                frame, "PROTOCOL_ERROR", "REQ payload must be empty; arguments travel as streams"
            )
            return
        if self.policy is None and not self._is_identity(cap):
            self._reject(
                frame,
                "PROTOCOL_VIOLATION",
                "REQ before POLICY: only the identity check may come first",
            )
            return
        if len(self.active) >= self.runtime.max_open_requests:
            self._reject(
                frame,
                "TOO_MANY_REQUESTS",
                f"too many open requests (at most {self.runtime.max_open_requests}); "
                "retry when some have ended",
                "resource",
            )
            return
        found = self.runtime.find_handler(cap)
        if found is None:
            self._reject(
                frame, "NO_HANDLER", f"No handler registered for cap: {cap}", "environment"
            )
            return
        a = Active(self, frame.id, frame.routing_id, cap)
        a.handler_urn, a.factory = found
        pool = self._pool_names.get(a.handler_urn)
        if pool is None:
            pool = self._pool_names[a.handler_urn] = str(CapUrn.parse(a.handler_urn))
        a.pool = pool
        a.receiver.receive(frame)
        self.active[a.rid] = a
        position = self.pools.arrive(a.pool, a)
        if position is None:
            self._start(a)
        else:
            self.push(
                frames.log(
                    a.rid,
                    "queued",
                    f"Request queued (position {position} on pool '{a.pool}')",
                    "internal",
                    xid=a.xid,
                )
            )

    @staticmethod
    def _is_identity(cap: str) -> bool:
        try:
            return CapUrn.parse(cap).is_equivalent(_IDENTITY)
        except UrnError:
            return False

    def _on_body(self, a: Active, frame: Frame) -> None:
        if a.input_error is not None:
            return
        try:
            events = a.receiver.receive(frame)
        except ProtocolError as exc:
            self._fail_input(a, exc)
            return
        for ev in events:
            if isinstance(ev, StreamData):
                s = a.inputs.get(ev.stream_id)
                if s is not None:
                    value = ev.value
                    payload, crc = frame.payload, frame.checksum
                    if (
                        type(value) is bytes
                        and len(value) >= PASS_THROUGH_MIN
                        and len(events) == 1
                        and payload is not None
                        and crc is not None
                    ):
                        # The value is this CHUNK's whole byte string (checksum verified):
                        # keep the wire form so an echoing handler can send it on unchanged.
                        s._push_data(value, (payload, crc))
                    else:
                        s._push_data(value)
                else:  # a closed live feed: drop the data but keep the sender's window open
                    a.receiver.consumed(ev.stream_id)
            elif isinstance(ev, StreamItem):
                s = a.inputs.get(ev.stream_id)
                if s is not None:
                    s._push_item(ev.value, ev.meta, 1 if ev is events[0] else 0)
            elif isinstance(ev, StreamOpened):
                if ev.output is not None:
                    self._fail_input(
                        a, ProtocolError(f"argument stream {ev.stream_id!r} carries an output name")
                    )
                    return
                s = InputStream(
                    ev.stream_id,
                    ev.media_urn,
                    is_sequence=ev.is_sequence,
                    unbounded=ev.unbounded,
                    meta=ev.meta,
                    consumed=a.consumed,
                    before_block=a.before_block,
                    wire_slot=a.wire_slot,
                )
                a.inputs[ev.stream_id] = s
                a.package._add(s)
            elif isinstance(ev, StreamClosed):
                s = a.inputs.get(ev.stream_id)
                if s is not None:
                    s._push_end()
            elif isinstance(ev, BodyEnded):
                a.package._end()
            elif isinstance(ev, ErrorReport):
                self._cancel(
                    a,
                    (
                        ev.code or "CANCELLED",
                        ev.attribution_class,
                        ev.message or "requester failed",
                    ),
                    silent=True,
                )
        if a.receiver.has_data_to_send:
            a.push_credit()

    def _fail_input(self, a: Active, exc: ProtocolError) -> None:
        """A frame of this request broke the rules: the handler's input fails with ``exc`` and
        the request ends with an ERR carrying the error's code (the handler is cancelled)."""
        if a.input_error is not None:
            return
        a.input_error = exc
        a.package._fail(exc)
        a.wake_all()
        if a.scope is not None:
            a.scope.cancel()
        elif not a.started:
            self.pools.remove_queued(lambda item: item is a)
            self.active.pop(a.rid, None)
            a.terminal_sent = True
            self.push(frames.err(a.rid, str(exc.code), str(exc), "internal", xid=a.xid))

    def _on_peer_frame(self, state: PeerState, frame: Frame) -> None:
        resp = state.call.response
        try:
            events = state.receiver.receive(frame)
        except ProtocolError as exc:
            resp._deliver(exc)
            self.peer_calls.pop(state.rid, None)
            return
        for ev in events:
            credit = (
                1
                if isinstance(ev, StreamData) or (isinstance(ev, StreamItem) and ev is events[0])
                else 0
            )
            resp._deliver(ev, credit)
            if isinstance(ev, (BodyEnded, ErrorReport)):
                self.peer_calls.pop(state.rid, None)
        for f in state.receiver.data_to_send():
            self.push(f)

    def _on_heartbeat(self, frame: Frame) -> None:
        meta = frame.meta or {}
        desired = meta.get("desired_capacities")
        if desired is not None:
            try:
                self.pools.apply_desired_json(desired)
            except UnknownPoolError as exc:
                self.push(frames.err(frame.id, "UNKNOWN_POOL", str(exc), "internal"))
                return
            self._admit_waiting()
        reply = {
            "drops_total": self.drops,
            "stragglers_total": self.writer.seq.stragglers,
            "overruns_total": self.overruns,
            "pools": self.pools.to_json_bytes(),
        }
        self.push(frames.heartbeat(frame.id, meta=reply))

    def _on_credit(self, frame: Frame) -> None:
        n = frame.credit or 0
        owner = self.active.get(frame.id)
        outputs = owner.outputs if owner is not None else None
        if outputs is None:
            state = self.peer_calls.get(frame.id)
            outputs = state.outputs if state is not None else None
        if outputs is None:
            return  # a grant after a terminal is a harmless no-op
        if frame.stream_id is not None:
            out = outputs.get(frame.stream_id)
            if out is not None:
                out.grant(n)
            return
        own = [o for k, o in outputs.items() if not k.startswith("peer:")]
        if len(own) == 1:
            own[0].grant(n)
        elif own:
            _note(
                f"CREDIT without a stream id for request {frame.id} with {len(own)} streams; ignored"
            )

    def _on_cancel(self, frame: Frame) -> None:
        a = self.active.get(frame.id)
        if a is None:
            _note(f"CANCEL for unknown or finished request {frame.id}; ignored")
            return
        if a.cancel is not None:
            _note(f"second CANCEL for request {frame.id}; ignored")
            return
        reason = cancel_terminal(frame.meta)
        if not a.started:
            self.pools.remove_queued(lambda item: item is a)
            code, cls, message = reason
            a.cancel = reason
            self.push(frames.err(a.rid, code, f"{message} (while queued)", cls, xid=a.xid))
            a.terminal_sent = True
            self.active.pop(a.rid, None)
        else:
            self._cancel(a, reason)
            for call in list(a.peer_calls):
                cancel = peer_cancel_frame(self, a, call)
                if cancel is not None:
                    self.push(cancel)
        if frame.force_kill:
            if not a.terminal_sent:
                code, cls, message = reason
                a.terminal_sent = True
                self.push(frames.err(a.rid, code, message, cls, xid=a.xid))
            _note(f"CANCEL with force_kill for request {frame.id}; ending the process")
            raise _Stop(EXIT_FORCE_KILLED)

    def _cancel(self, a: Active, reason: tuple[str, str, str], *, silent: bool = False) -> None:
        if a.cancel is None:
            a.cancel = reason
        if silent:
            a.terminal_sent = True
        a.package._fail(StreamAbandonedError(f"input abandoned: {reason[2]}"))
        a.wake_all()
        if a.scope is not None:
            a.scope.cancel()
        elif not a.started:
            self.pools.remove_queued(lambda item: item is a)
            self.active.pop(a.rid, None)
            self._idle.set()

    def _on_close_stream(self, frame: Frame) -> None:
        a = self.active.get(frame.id)
        if a is None:
            _note(f"CLOSE_STREAM for unknown request {frame.id}; ignored")
            return
        live = [
            s for sid, s in a.inputs.items() if s.is_unbounded and (frame.stream_id in (None, sid))
        ]
        if not live:
            _note(f"CLOSE_STREAM for request {frame.id}, which has no live-feed input; ignored")
            return
        for s in live:
            s._push_end()
            a.inputs.pop(s.stream_id, None)
