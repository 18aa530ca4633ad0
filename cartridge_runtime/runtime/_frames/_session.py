"""One CBOR-mode connection: the anyio shell over the sans-IO cartridge connection.

Theory of operation
-------------------
Every protocol decision is made by :class:`~cartridge_runtime.protocol.CartridgeConnection`:
the handshake, POLICY, relay refusal, REQ admission through the pool table, routing of each
frame, credit, cancel, and the terminal of each request. The session only moves bytes and
tasks, in three composed parts: the shared :class:`~cartridge_runtime._plumbing.FramePump`
reads and decodes, the :class:`~._handlers.HandlerRunner` runs handlers, and the
:class:`~._writer.FrameWriter` (the shared outbox, set up the cartridge's way) sends.

The reader hands each frame to :meth:`Session._dispatch`, which feeds it to the connection,
queues the frames the connection decided to send, and acts on the event it returned, without
waiting for anything: a request's body events go into its input mailboxes (never blocking:
credit bounds what can pile up), an admitted REQ gets its handler started. Every outgoing
frame, from any task, goes through one bounded queue to the writer, which numbers it by the
connection core (dropping stragglers), encodes, and sends whatever is queued as one write.

Dispatch is synchronous: the replies it sends are queued even past the writer's bound, and
the pump takes no further frame while the queue is over it. So on asyncio, with the stdin
pipe (:class:`~cartridge_runtime._plumbing.FdReceiveStream`), the whole read path runs inside
the event loop's reader callback: read, decode and dispatch, with no task switch and no
coroutine per frame. Elsewhere (trio, or any other byte stream) a task runs the same steps.

How the session ends, and with which exit status, is :mod:`._exit`'s table: 0 at EOF (running
handlers get a short grace, then are cancelled), 1 for a handshake failure or a relay frame, 65
when the byte stream can no longer be trusted, 137 after a CANCEL with force_kill. Each
non-zero exit prints one ``cartridge: ...`` line to stderr.
"""

from __future__ import annotations

import sys

import anyio
import anyio.abc

from cartridge_runtime._plumbing import FramePump, source_for
from cartridge_runtime.protocol import (
    BodyEnded,
    Cancelled,
    CartridgeConnection,
    CloseInputs,
    CloseReason,
    ConnectionClosed,
    ConnEvent,
    ErrorReport,
    Event,
    Frame,
    FrameDecoder,
    Handshaken,
    HeartbeatProbe,
    InputFailed,
    Limits,
    Notice,
    ProtocolError,
    RequestAdmitted,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
    encode_frame,
    flow_dispatcher,
)

from .._input import _DATA, _END, InputStream, StreamFeed
from ._exit import EXIT_FOR, ExitStatus
from ._handlers import HandlerRunner
from ._served import OpFactory, Registrations, ServedCartridge
from ._wire import Active, Connection
from ._writer import FrameWriter

#: Smallest byte value whose CHUNK wire form is kept for pass-through (see ``WireOutput``).
PASS_THROUGH_MIN = 4096


def _note(message: str) -> None:
    print(f"cartridge: {message}", file=sys.stderr, flush=True)


class _Stop(Exception):
    """Ends the read loop: the connection closed."""

    def __init__(self, closed: ConnectionClosed) -> None:
        super().__init__(closed.message)
        self.closed = closed


class Session:
    """The cartridge side of one connection (see the module docstring).

    :param cartridge: what is served (the runtime passes itself).
    :param receive: the byte stream from the host.
    :param send: the byte stream to the host.
    """

    def __init__(
        self,
        cartridge: ServedCartridge,
        receive: anyio.abc.ByteReceiveStream,
        send: anyio.abc.ByteSendStream,
    ) -> None:
        self.cartridge = cartridge
        self.send_stream = send
        self.limits: Limits = cartridge.limits
        self.writer = FrameWriter(send, lambda: self.limits.max_frame)
        self.receive_stream = receive
        #: Reads, decodes and dispatches; pauses while the writer's queue is over its bound.
        self.pump = FramePump(FrameDecoder(), self._dispatch, room=self.writer.outbox)
        # From the handshake on the pump dispatches a request's body frames compiled, in front
        # of _dispatch (protocol._session_path.flow_dispatcher).
        self.overruns = 0
        self.conn: Connection | None = None
        self.runner: HandlerRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until EOF or a fatal condition; return the exit status."""
        cartridge = self.cartridge
        try:
            pools = cartridge.make_pools()
        except ValueError as exc:
            _note(f"cannot serve: the pool declarations do not fit the registered handlers: {exc}")
            return ExitStatus.FAILURE
        conn: Connection = CartridgeConnection[OpFactory](
            limits=cartridge.limits,
            handlers=Registrations(cartridge),
            pools=pools,
            manifest=cartridge.manifest.to_json_bytes(),
            max_open_requests=cartridge.max_open_requests,
        )
        self.conn = conn
        self.writer.number_by(conn.seq)
        runner = self.runner = HandlerRunner(conn, cartridge, self.writer)
        self._bind(conn, runner)
        try:
            first = await self.pump.next_frame(self.receive_stream)
        except ProtocolError as exc:
            _note(f"protocol error: {exc}")
            return ExitStatus.PROTOCOL
        if first is None:
            return ExitStatus.OK
        event = conn.receive(first)
        if not isinstance(event, Handshaken):
            closed = event if isinstance(event, ConnectionClosed) else None
            _note(closed.message if closed is not None else "handshake failed")
            return ExitStatus.FAILURE
        self.limits = event.limits
        self.pump.decoder.max_frame = event.limits.max_frame
        self.pump.dispatch_by(
            flow_dispatcher(
                conn,
                runner.active,
                self._dispatch,
                self._deliver,
                data_tag=_DATA,
                end_entry=(_END, None, None, 0),
                pass_through_min=PASS_THROUGH_MIN,
            )
        )
        try:
            await self.send_stream.send(encode_frame(event.hello))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            _note(f"cannot write HELLO: {exc}")
            return ExitStatus.FAILURE
        status = ExitStatus.OK
        async with anyio.create_task_group() as tg:
            runner.bind(tg)
            tg.start_soon(self.writer.run)
            try:
                await self.pump.run(source_for(self.receive_stream))
            except _Stop as stop:
                _note(stop.closed.message)
                status = EXIT_FOR[stop.closed.reason]
            except ProtocolError as exc:
                _note(f"protocol error: {exc}")
                conn.close(CloseReason.BROKEN_STREAM, str(exc))
                status = EXIT_FOR[CloseReason.BROKEN_STREAM]
                # FRM-21: every request still open ends with ERR PROTOCOL_ERROR, and the host
                # hears why on id 0 (no request owns it), before the cartridge goes away.
                why = f"the host's byte stream broke: {exc}"
                for request in conn.fail_all(why):
                    a = runner.active.get(request.rid)
                    if a is not None:
                        runner.abort(a, why)
                self._flush_outbox()
                with anyio.move_on_after(1):
                    await self.writer.send(conn.connection_error(exc))
            await runner.shutdown(graceful=status == ExitStatus.OK)
            self._flush_outbox()
            self.writer.close()
            with anyio.move_on_after(10):
                await self.writer.done.wait()
            tg.cancel_scope.cancel()
        return status

    def _bind(self, conn: Connection, runner: HandlerRunner) -> None:
        """Bind the per-frame path: what each kind of event the connection returns asks of
        the session (one dict lookup per frame)."""
        self._conn_receive = conn.receive
        self._outbox = conn.outbox
        self._active = runner.active
        self._push = self.writer.push
        self._on_event = {
            RequestAdmitted: self._on_admitted,
            InputFailed: self._on_input_failed,
            Cancelled: self._on_cancelled,
            HeartbeatProbe: self._on_heartbeat,
            CloseInputs: self._on_close_inputs,
            Notice: self._on_notice,
            ConnectionClosed: self._on_closed,
        }

    @property
    def drops(self) -> int:
        """Frames dropped: not queueable, not encodable, or not writable."""
        return self.writer.drops

    # -- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, frame: Frame) -> None:
        event = self._conn_receive(frame)
        outbox = self._outbox
        if outbox:
            push = self._push
            for f in outbox:
                push(f)
            outbox.clear()
        if event is None:
            return
        if type(event) is list:
            a = self._active.get(frame.id)
            if a is not None:
                self._deliver(a, frame, event)
            return
        self._on_event[type(event)](event)

    def _flush_outbox(self) -> None:
        outbox = self._outbox
        for f in outbox:
            self._push(f)
        outbox.clear()

    def _deliver(self, a: Active, frame: Frame, events: list[Event]) -> None:
        """Put a request frame's events into the request's input streams."""
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
                        s.push_data(value, (payload, crc))
                    else:
                        s.push_data(value)
                else:  # a closed live feed: drop the data but keep the sender's window open
                    a.receiver.consumed(ev.stream_id)
                    self._flush_credit(a)
            elif isinstance(ev, StreamItem):
                s = a.inputs.get(ev.stream_id)
                if s is not None:
                    s.push_item(ev.value, ev.meta, 1 if ev is events[0] else 0)
            elif isinstance(ev, StreamOpened):
                stream = InputStream(
                    ev.stream_id,
                    ev.media_urn,
                    is_sequence=ev.is_sequence,
                    unbounded=ev.unbounded,
                    meta=ev.meta,
                    consumed=a.consumed,
                    before_block=a.before_block,
                    wire_slot=a.wire_slot,
                )
                a.inputs[ev.stream_id] = StreamFeed(stream)
                a.feed.add(stream)
            elif isinstance(ev, StreamClosed):
                s = a.inputs.get(ev.stream_id)
                if s is not None:
                    s.push_end()
            elif isinstance(ev, BodyEnded):
                a.feed.end()
            elif isinstance(ev, ErrorReport):  # the requester failed (the connection gave it up)
                runner = self.runner
                assert runner is not None
                runner.abort(a, ev.message or "requester failed")

    def _flush_credit(self, a: Active) -> None:
        for f in a.receiver.data_to_send():
            self._push(f)

    # -- events ------------------------------------------------------------------------------

    def _on_admitted(self, event: ConnEvent) -> None:
        assert isinstance(event, RequestAdmitted) and self.runner is not None
        self.runner.admit(event.request, event.queued)

    def _on_input_failed(self, event: ConnEvent) -> None:
        assert isinstance(event, InputFailed) and self.runner is not None
        a = self._active.get(event.rid)
        if a is not None:
            self.runner.fail_input(a, event.error)

    def _on_cancelled(self, event: ConnEvent) -> None:
        assert isinstance(event, Cancelled) and self.runner is not None
        a = self._active.get(event.rid)
        if a is not None:
            cancel = a.request.cancel
            self.runner.abort(a, cancel.message if cancel is not None else "cancelled")
        if event.closed is not None:
            raise _Stop(event.closed)

    def _on_heartbeat(self, event: ConnEvent) -> None:
        assert isinstance(event, HeartbeatProbe) and self.runner is not None
        conn = self.conn
        assert conn is not None
        if event.admitted:
            self.runner.start_dequeued(event.admitted)
        writer = self.writer
        self._push(
            conn.heartbeat_reply(
                event.hid,
                drops=writer.drops,
                stragglers=conn.seq.stragglers,
                overruns=self.overruns,
            )
        )

    def _on_close_inputs(self, event: ConnEvent) -> None:
        assert isinstance(event, CloseInputs)
        a = self._active.get(event.rid)
        if a is None:
            return
        live = [
            sid
            for sid, feed in a.inputs.items()
            if feed.stream.is_unbounded and event.stream_id in (None, sid)
        ]
        if not live:
            _note(f"CLOSE_STREAM for request {event.rid}, which has no live-feed input; ignored")
            return
        for sid in live:
            a.inputs.pop(sid).push_end()

    def _on_notice(self, event: ConnEvent) -> None:
        assert isinstance(event, Notice)
        _note(event.message)

    def _on_closed(self, event: ConnEvent) -> None:
        assert isinstance(event, ConnectionClosed)
        raise _Stop(event)
