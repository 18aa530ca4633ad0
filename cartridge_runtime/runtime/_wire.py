"""The wire side of a request: per-request state, output backends, reporter and peer transport.

Everything here produces frames and hands them to the session's writer queue
(:meth:`Session.send`); nothing writes bytes directly. Data CHUNKs wait for credit on an
:class:`anyio.Event` per stream (no polling); a cancel wakes every waiter.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from cartridge_runtime.protocol import (
    ATTRIBUTION_CLASSES,
    COALESCE_BYTES,
    BodyReceiver,
    Frame,
    FrameType,
    MessageId,
    OutgoingStream,
    frames,
)
from cartridge_runtime.protocol._codec import bytes_head

from ._errors import RequestCancelled
from ._input import InputPackage, InputStream, _noop
from ._output import OutputSpec, OutputStream
from ._peer import PeerCall

if TYPE_CHECKING:
    from ._session import Session


def _cls(attribution_class: str) -> str:
    return attribution_class if attribution_class in ATTRIBUTION_CLASSES else "internal"


class WireOutput:
    """Frames for one outgoing stream (a response output or a peer-call argument)."""

    def __init__(self, session: Session, owner: Active, og: OutgoingStream) -> None:
        self.session = session
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

    async def _emit(self, out: list[Frame]) -> None:
        writer = self.session.writer
        for f in out:
            if f.frame_type is FrameType.CHUNK:
                while not self.og.take_credit():
                    if self.owner.cancel is not None:
                        raise RequestCancelled("the request was cancelled while waiting for credit")
                    if self._event is None:
                        self._event = anyio.Event()
                    await self._event.wait()
            if not writer.try_send(f):
                await writer.send(f)

    async def start(
        self, is_sequence: bool, unbounded: bool, meta: Mapping[str, Any] | None
    ) -> None:
        await self._emit(self.og.start(is_sequence=is_sequence, unbounded=unbounded, meta=meta))

    async def write(self, data: bytes | memoryview) -> None:
        n = len(data)
        step = self.step
        slot = self.owner.wire_slot
        if slot[0] is not None:
            taken, slot[0] = slot[0], None
            if taken[0] is data and (frame := self._pass_through(n, taken[1], taken[2])):
                await self._emit([frame])
                return
        if n <= step:
            await self._emit(self.og.write_bytes(data, time.monotonic()))
            return
        mv = memoryview(data)
        for pos in range(0, n, step):
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
            await self.write(value if isinstance(value, bytes) else memoryview(value))
        else:
            await self._emit(self.og.emit_value(value))

    async def emit_item(self, value: Any, meta: Mapping[str, Any] | None) -> None:
        await self._emit(self.og.emit_item(value, meta))

    async def flush(self) -> None:
        await self._emit(self.og.flush())

    async def close(self) -> None:
        await self._emit(self.og.close())


class Active:
    """Everything the session keeps for one incoming request."""

    def __init__(self, session: Session, rid: MessageId, xid: MessageId | None, cap: str) -> None:
        self.session = session
        self.rid = rid
        self.xid = xid
        self.cap = cap
        self.handler_urn = ""
        self.pool = ""
        self.factory: Any = None
        limits = session.limits
        self.receiver = BodyReceiver(
            rid, xid=xid, initial_credit=limits.initial_credit, expect_req=True
        )
        self.package = InputPackage()
        self.package._before_block = self._flush_all
        self.inputs: dict[str, InputStream] = {}
        self.outputs: dict[str, WireOutput] = {}
        self.peer_calls: list[PeerCall] = []
        self.scope: anyio.CancelScope | None = None
        self.cancel: tuple[str, str, str] | None = None
        self.input_error: Exception | None = None
        self.terminal_sent = False
        self.started = False
        self.final: tuple[float, str | None] = (1.0, None)
        # 8 random hex digits, as a uuid4's first 8 would be, without building a UUID.
        self.prefix = f"resp-{os.urandom(4).hex()}"
        #: The last whole-CHUNK byte value a handler took, with its wire form (pass-through).
        self.wire_slot: list[Any] = [None]

    def __repr__(self) -> str:
        return f"Active(rid={self.rid}, cap={self.cap!r})"

    def detach(self) -> None:
        """Break this request's reference cycles once it is over.

        Its input streams call back into it and its outputs point back at it; left as they
        are, every finished request would wait for the cyclic garbage collector (about 20
        objects a request, and collections that cost ~5% of a small request's time). Cut here,
        reference counting frees them as soon as the handler lets go.
        """
        for stream in self.inputs.values():
            stream._consumed = stream._before_block = _noop
        self.inputs.clear()
        self.outputs.clear()
        self.package._before_block = _noop

    # -- credit hooks of the input streams --------------------------------------------------

    async def consumed(self, stream_id: str) -> None:
        self.receiver.consumed(stream_id)
        await self.send_credit()

    async def before_block(self, stream_id: str) -> None:
        self.receiver.flush_credit(stream_id)
        await self.send_credit()

    async def _flush_all(self) -> None:
        self.receiver.flush_credit()
        await self.send_credit()

    async def send_credit(self) -> None:
        for f in self.receiver.data_to_send():
            await self.session.send(f)

    def push_credit(self) -> None:
        """Queue the receiver's CREDIT frames at once (from dispatch)."""
        for f in self.receiver.data_to_send():
            self.session.push(f)

    def wake_all(self) -> None:
        for out in self.outputs.values():
            out.wake()

    # -- outputs ----------------------------------------------------------------------------

    def make_output(self, spec: OutputSpec, reporter: WireReporter) -> OutputStream:
        limits = self.session.limits
        sid = f"{self.prefix}-{spec.index}"
        og = OutgoingStream(
            self.rid,
            sid,
            spec.media_urn,
            xid=self.xid,
            max_chunk=limits.effective_chunk,
            initial_credit=limits.initial_credit,
            is_sequence=spec.is_sequence,
            output=None if spec.is_main else spec.declared_urn,
        )
        backend = WireOutput(self.session, self, og)
        self.outputs[sid] = backend
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
        await a.session.send(frame)

    async def log(
        self, level: str, message: str, attribution_class: str, arg_urn: str | None
    ) -> None:
        a = self.active
        await a.session.send(
            frames.log(a.rid, level, message, _cls(attribution_class), arg_urn=arg_urn, xid=a.xid)
        )

    async def telemetry(self, level: str, message: str, data: Any) -> None:
        a = self.active
        await a.session.send(frames.log(a.rid, level, message, "internal", xid=a.xid, data=data))

    def finish(self, progress: float, message: str | None) -> None:
        self.active.final = (progress, message)


class PeerState:
    """The session's record of one outgoing peer call."""

    def __init__(self, session: Session, call: PeerCall, parent: Active) -> None:
        self.call = call
        self.parent = parent
        self.rid = MessageId.new()
        self.receiver = BodyReceiver(
            self.rid, initial_credit=session.limits.initial_credit, expect_req=False
        )
        self.outputs: dict[str, WireOutput] = {}
        # Credit waits of argument streams stop when the parent is cancelled.
        self.cancel: tuple[str, str, str] | None = None


class WirePeer:
    """:class:`~cartridge_runtime.runtime.PeerTransport` over the session's frames."""

    def __init__(self, session: Session, active: Active, reporter: WireReporter) -> None:
        self.session = session
        self.active = active
        self.reporter = reporter

    async def send_req(self, call: PeerCall) -> None:
        state = PeerState(self.session, call, self.active)
        call.rid = state.rid
        self.session.peer_calls[state.rid] = state
        self.active.peer_calls.append(call)

        async def consumed(stream_id: str) -> None:
            state.receiver.consumed(stream_id)
            for f in state.receiver.data_to_send():
                await self.session.send(f)

        async def before_block() -> None:
            state.receiver.flush_credit()
            for f in state.receiver.data_to_send():
                await self.session.send(f)

        call.response.consumed = consumed
        call.response.before_block = before_block
        await self.session.send(frames.req(state.rid, call.cap_urn))

    def arg_stream(self, call: PeerCall, media_urn: str, index: int) -> OutputStream:
        state = self.session.peer_calls[call.rid]
        limits = self.session.limits
        sid = str(uuid.uuid4())
        og = OutgoingStream(
            state.rid,
            sid,
            media_urn,
            max_chunk=limits.effective_chunk,
            initial_credit=limits.initial_credit,
        )
        backend = WireOutput(self.session, self.active, og)
        state.outputs[sid] = backend
        self.active.outputs[f"peer:{sid}"] = backend  # woken with the parent on cancel
        spec = OutputSpec(
            media_urn=media_urn, declared_urn=media_urn, name=f"arg-{index}", index=index
        )
        return OutputStream(spec, backend, self.reporter)

    async def send_end(self, call: PeerCall) -> None:
        await self.session.send(frames.end(call.rid, response=False))

    async def cancel(self, call: PeerCall) -> None:
        frame = peer_cancel_frame(self.session, self.active, call)
        if frame is not None:
            await self.session.send(frame)


def peer_cancel_frame(session: Session, parent: Active, call: PeerCall) -> Frame | None:
    """The CANCEL frame for a peer call of ``parent`` (with the parent's cancel reason, if
    any), or ``None`` when the call has no request on the wire or is already over."""
    if call.rid is None or call.rid not in session.peer_calls:
        return None
    reason = parent.cancel
    if reason is None:
        return frames.cancel(call.rid)
    code, cls, message = reason
    return frames.cancel(call.rid, code=code, attribution_class=cls, message=message)
