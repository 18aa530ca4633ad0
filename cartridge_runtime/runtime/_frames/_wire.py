"""The wire side of a request: its IO state, output backends, reporter and peer transport.

:class:`Active` holds what the runtime keeps for one incoming request beside the sans-IO
connection's record of it (:class:`~cartridge_runtime.protocol.ServedRequest`): the input
streams, the output backends, the handler's cancel scope. Everything here produces frames and
hands them to the session's :class:`~._writer.FrameWriter`; nothing writes bytes directly.
Data CHUNKs wait for credit on an :class:`anyio.Event` per stream (no polling); a cancel wakes
every waiter.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

import anyio

from cartridge_runtime.protocol import (
    ATTRIBUTION_CLASSES,
    COALESCE_BYTES,
    AttributionClass,
    CartridgeConnection,
    ErrorReport,
    Frame,
    FrameType,
    Limits,
    OutgoingStream,
    OutState,
    ServedRequest,
    frame_queuer,
    frames,
    slotted_maker,
    small_output_paths,
)
from cartridge_runtime.protocol._codec import bytes_head

from .._errors import RequestCancelled
from .._input import StreamFeed
from .._input_package import InputPackage, PackageFeed
from .._output import OutputSpec, OutputStream
from .._peer import PeerCall, ResponseSink
from ._served import OpFactory
from ._writer import FrameWriter

_CHUNK = FrameType.CHUNK
#: Queues a run of frames into the writer's outbox while nothing waits (compiled or not).
_queue_frames = frame_queuer()
#: A small output's frames in one call each (answer ``None`` for the methods to decide).
_open_small, _close_small = small_output_paths()
#: An output's stream from all its fields in this order, in one C call (``None``: not compiled).
_new_outgoing = slotted_maker(
    OutgoingStream,
    (
        "rid",
        "xid",
        "stream_id",
        "media_urn",
        "max_chunk",
        "credit",
        "is_sequence",
        "unbounded",
        "output",
        "meta",
        "coalesce",
        "state",
        "chunks_sent",
        "_buf",
        "_buf_since",
    ),
)
_NEW = OutState.NEW

#: The sans-IO connection of a CBOR-mode session, with its handler type.
Connection = CartridgeConnection[OpFactory]


def _cls(attribution_class: str) -> str:
    return (
        attribution_class if attribution_class in ATTRIBUTION_CLASSES else AttributionClass.INTERNAL
    )


class WireOutput:
    """Frames for one outgoing stream (a response output or a peer-call argument)."""

    def __init__(self, writer: FrameWriter, owner: Active, og: OutgoingStream) -> None:
        self.writer = writer
        self.outbox = writer.outbox
        self.owner = owner
        self.og = og
        self._event: anyio.Event | None = None
        self.step = og.max_chunk

    def grant(self, n: int) -> None:
        self.og.grant(n)
        self.wake()

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    def _queue(self, out: list[Frame]) -> int:
        """Queue the frames of ``out`` that need no wait, in order, and return how many:
        the rest, from the first CHUNK without credit or the first frame the writer would
        make wait, is for :meth:`_emit`. The common case (credit and room for everything)
        is thus a plain call, with no coroutine (one C call where compiled)."""
        return _queue_frames(self.outbox, self.og, out, _CHUNK)

    async def _emit(self, out: list[Frame]) -> None:
        og = self.og
        try_send = self.writer.try_send
        for f in out:
            if f.frame_type is _CHUNK:
                if og.credit > 0:
                    og.credit -= 1
                else:
                    await self._wait_credit()
            if not try_send(f):
                await self.writer.send(f)

    async def _wait_credit(self) -> None:
        """Spend one credit for a CHUNK, waiting for a grant while there is none."""
        while not self.og.take_credit():
            if self.owner.request.cancel is not None:
                raise RequestCancelled("the request was cancelled while waiting for credit")
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()

    async def start(
        self, is_sequence: bool, unbounded: bool, meta: Mapping[str, Any] | None
    ) -> None:
        out = self.og.start(is_sequence=is_sequence, unbounded=unbounded, meta=meta)
        if (done := self._queue(out)) < len(out):
            await self._emit(out[done:])

    def _send(self, out: list[Frame]) -> Awaitable[None] | None:
        """Queue ``out`` in place as far as nothing waits; the rest as an awaitable."""
        if (done := _queue_frames(self.outbox, self.og, out, _CHUNK)) < len(out):
            return self._emit(out[done:])
        return None

    def start_write(self, data: bytes | memoryview) -> Awaitable[None] | None:
        """:meth:`start` in scalar mode, then :meth:`write`: for a small write (one CHUNK
        at most) in one step. Like :meth:`write` and :meth:`close`, a plain call that
        queues the frames in place, returning an awaitable only for what must wait (credit,
        room in the queue), so the common small response costs no coroutine here."""
        if len(data) > self.step or self.owner.wire_slot[0] is not None:
            return self._start_then_write(data)
        og = self.og
        out = _open_small(og, data, time.monotonic())
        if out is None:
            out = og.start(is_sequence=False, unbounded=False)
            out += og.write_bytes(data, time.monotonic())
        return self._send(out)

    async def _start_then_write(self, data: bytes | memoryview) -> None:
        await self.start(False, False, None)
        if (pending := self.write(data)) is not None:
            await pending

    def write(self, data: bytes | memoryview) -> Awaitable[None] | None:
        n = len(data)
        slot = self.owner.wire_slot
        if slot[0] is not None:
            taken, slot[0] = slot[0], None
            if taken[0] is data and (frame := self._pass_through(n, taken[1], taken[2])):
                return self._send([frame])
        if n <= self.step:
            out = self.og.write_bytes(data, time.monotonic())
            return self._send(out) if out else None
        return self._write_pieces(data)

    async def _write_pieces(self, data: bytes | memoryview) -> None:
        """Write more than one CHUNK's worth, a piece at a time (each may wait for credit)."""
        step = self.step
        mv = memoryview(data)
        for pos in range(0, len(data), step):
            await self._emit(self.og.write_bytes(mv[pos : pos + step], time.monotonic()))

    def _pass_through(self, n: int, payload: bytes, crc: int) -> Frame | None:
        """The CHUNK for writing ``n`` bytes that arrived whole as ``payload`` (a verified
        CHUNK payload with checksum ``crc``), reusing both; ``None`` when the ordinary path
        would not make exactly that one CHUNK (coalescing, sequence mode, another size).

        An echoing handler thus costs no second checksum and no re-wrapping copy, and the
        frame is the one ``OutgoingStream.write_bytes`` would build.
        """
        og = self.og
        if (
            og.is_sequence
            or not og.started
            or og.closed
            or og.buffered
            or n > og.max_chunk
            or (og.coalesce and n < COALESCE_BYTES)
            or payload[: len(head := bytes_head(n))] != head
            or len(payload) != len(head) + n
        ):
            return None
        frame = Frame(
            frame_type=FrameType.CHUNK,
            id=og.rid,
            payload=payload,
            stream_id=og.stream_id,
            routing_id=og.xid,
            chunk_index=og.chunks_sent,
            checksum=crc,
        )
        og.chunks_sent += 1
        return frame

    async def emit_value(self, value: Any) -> None:
        if isinstance(value, (bytes, bytearray, memoryview)) and not self.og.is_sequence:
            pending = self.write(value if isinstance(value, bytes) else memoryview(value))
            if pending is not None:
                await pending
        else:
            await self._emit(self.og.emit_value(value))

    async def emit_item(self, value: Any, meta: Mapping[str, Any] | None) -> None:
        await self._emit(self.og.emit_item(value, meta))

    async def flush(self) -> None:
        await self._emit(self.og.flush())

    def close(self) -> Awaitable[None] | None:
        out = _close_small(self.og)
        if out is None:
            out = self.og.close()
        return self._send(out) if out else None


class Active:
    """The IO side of one incoming request (its protocol state is :attr:`request`)."""

    def __init__(
        self, request: ServedRequest[OpFactory], writer: FrameWriter, limits: Limits
    ) -> None:
        self.request = request
        self.rid = request.rid
        self.xid = request.xid
        self.writer = writer
        self.limits = limits
        self.receiver = request.receiver
        #: The feeding side of the request's input (the handler reads :attr:`package`).
        self.feed = PackageFeed(before_block=self._flush_all)
        self.package: InputPackage = self.feed.package
        #: The feeding sides of the input streams open for data, by stream id.
        self.inputs: dict[str, StreamFeed] = {}
        #: Every output backend of the request, its peer calls' arguments too (woken on cancel).
        self.outputs: list[WireOutput] = []
        self.scope: anyio.CancelScope | None = None
        self.final: tuple[float, str | None] = (1.0, None)
        #: What a cancelled handler's terminal reports, kept while its worker leaves the scope.
        self.failure: ErrorReport | None = None
        # 8 random hex digits, as a uuid4's first 8 would be, without building a UUID.
        self.prefix = f"resp-{os.urandom(4).hex()}"
        #: The last whole-CHUNK byte value a handler took, with its wire form (pass-through).
        self.wire_slot: list[Any] = [None]

    def __repr__(self) -> str:
        return f"Active(rid={self.rid}, cap={self.request.cap!r})"

    def detach(self) -> None:
        """Break this request's reference cycles once it is over.

        Its input streams call back into it and its outputs point back at it; left as they
        are, every finished request would wait for the cyclic garbage collector (about 20
        objects a request, and collections that cost ~5% of a small request's time). Cut here,
        reference counting frees them as soon as the handler lets go.
        """
        for feed in self.inputs.values():
            feed.detach()
        self.inputs.clear()
        self.outputs.clear()
        self.request.outputs.clear()
        self.feed.detach()

    # -- credit hooks of the input streams --------------------------------------------------

    def consumed(self, stream_id: str) -> Awaitable[None] | None:
        """Return the credit of one value taken; an awaitable only when CREDIT frames are due
        (they are batched), so taking a value is usually a plain call."""
        receiver = self.receiver
        receiver.consumed(stream_id)
        credits = receiver.data_to_send()
        return self._send_frames(credits) if credits else None

    async def _send_frames(self, out: list[Frame]) -> None:
        for f in out:
            await self.writer.send(f)

    async def before_block(self, stream_id: str) -> None:
        self.receiver.flush_credit(stream_id)
        await self.send_credit()

    async def _flush_all(self) -> None:
        self.receiver.flush_credit()
        await self.send_credit()

    async def send_credit(self) -> None:
        for f in self.receiver.data_to_send():
            await self.writer.send(f)

    def wake_all(self) -> None:
        for out in self.outputs:
            out.wake()

    # -- outputs ----------------------------------------------------------------------------

    def make_output(self, spec: OutputSpec, reporter: WireReporter) -> OutputStream:
        limits = self.limits
        sid = f"{self.prefix}-{spec.index}"
        output = None if spec.is_main else spec.declared_urn
        # The same stream OutgoingStream(...) makes, its slots set in one call when compiled.
        og = (
            _new_outgoing(
                self.rid,
                self.xid,
                sid,
                spec.media_urn,
                limits.effective_chunk,
                limits.initial_credit,
                spec.is_sequence,
                False,
                output,
                None,
                True,
                _NEW,
                0,
                bytearray(),
                0.0,
            )
            if _new_outgoing is not None
            else OutgoingStream(
                self.rid,
                sid,
                spec.media_urn,
                xid=self.xid,
                max_chunk=limits.effective_chunk,
                initial_credit=limits.initial_credit,
                is_sequence=spec.is_sequence,
                output=output,
            )
        )
        backend = WireOutput(self.writer, self, og)
        self.outputs.append(backend)
        self.request.outputs[sid] = backend
        return OutputStream(spec, backend, reporter)


class WireReporter:
    """Progress and LOG frames of one request (never wait for credit)."""

    def __init__(self, active: Active) -> None:
        self.active = active
        self.last = 0.0  #: the last fraction reported (repeated by sync keepalives)

    async def progress(self, fraction: float | None, message: str) -> None:
        a = self.active
        if fraction is None:
            frame = frames.progress(a.rid, self.last, message, xid=a.xid, indeterminate=True)
        else:
            self.last = fraction
            frame = frames.progress(a.rid, fraction, message, xid=a.xid)
        await a.writer.send(frame)

    async def log(
        self, level: str, message: str, attribution_class: str, arg_urn: str | None
    ) -> None:
        a = self.active
        await a.writer.send(
            frames.log(a.rid, level, message, _cls(attribution_class), arg_urn=arg_urn, xid=a.xid)
        )

    async def telemetry(self, level: str, message: str, data: Any) -> None:
        a = self.active
        await a.writer.send(
            frames.log(a.rid, level, message, AttributionClass.INTERNAL, xid=a.xid, data=data)
        )

    def finish(self, progress: float, message: str | None) -> None:
        self.active.final = (progress, message)


class WirePeer:
    """:class:`~cartridge_runtime.runtime.PeerTransport` over the session's frames: the
    connection routes the response to the call's :class:`~._peer.PeerResponse`."""

    def __init__(self, conn: Connection, active: Active, reporter: WireReporter) -> None:
        self.conn = conn
        self.active = active
        self.reporter = reporter

    async def send_req(self, call: PeerCall) -> None:
        route = self.conn.open_peer_call(self.active.request, ResponseSink(call.response))
        call.rid = route.rid
        receiver = route.receiver
        writer = self.active.writer

        async def consumed(stream_id: str) -> None:
            receiver.consumed(stream_id)
            for f in receiver.data_to_send():
                await writer.send(f)

        async def before_block() -> None:
            receiver.flush_credit()
            for f in receiver.data_to_send():
                await writer.send(f)

        call.response.consumed = consumed
        call.response.before_block = before_block
        await writer.send(frames.req(route.rid, call.cap_urn))

    def arg_stream(self, call: PeerCall, media_urn: str, index: int) -> OutputStream:
        assert call.rid is not None  # the REQ goes first (PeerCall._ensure_req)
        route = self.conn.peer_calls[call.rid]
        limits = self.conn.limits
        sid = str(uuid.uuid4())
        og = OutgoingStream(
            route.rid,
            sid,
            media_urn,
            max_chunk=limits.effective_chunk,
            initial_credit=limits.initial_credit,
        )
        backend = WireOutput(self.active.writer, self.active, og)
        route.outputs[sid] = backend
        self.active.outputs.append(backend)  # woken with the parent on cancel
        spec = OutputSpec(
            media_urn=media_urn, declared_urn=media_urn, name=f"arg-{index}", index=index
        )
        return OutputStream(spec, backend, self.reporter)

    async def send_end(self, call: PeerCall) -> None:
        assert call.rid is not None  # the REQ goes first (PeerCall._ensure_req)
        await self.active.writer.send(frames.end(call.rid, response=False))

    async def cancel(self, call: PeerCall) -> None:
        if call.rid is None:
            return
        frame = self.conn.peer_cancel_frame(self.active.request, call.rid)
        if frame is not None:
            await self.active.writer.send(frame)
