"""One engine call: sending its arguments, receiving its response, credit, cancel.

Theory of operation
-------------------
A :class:`CallState` is registered in its connection under the call's request id. The
connection's reader hands it every response frame; it runs them through a sans-IO
:class:`BodyReceiver` (which validates the response and decodes chunks) and queues the
resulting events. The caller takes events from :class:`Response`; each data event it takes is
reported as consumed, so CREDIT goes back to the cartridge only as fast as the caller reads:
memory stays bounded whatever the size. Before the caller blocks on an empty queue, pending
credit is flushed (otherwise a cartridge holding a half window would wait forever).

The arguments are sent by a task in the connection's task group, one stream after the other
(``arg-0``, ``arg-1``...), each CHUNK only when the stream has credit; CREDIT frames from the
cartridge (``credit_dir: request``) reach :meth:`CallState.on_frame` and wake the sender.
Sending and receiving therefore run at the same time.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import cbor2

from .. import protocol as P
from ..protocol import ErrorCode, Frame, FrameType, MessageId, frames
from ._errors import CallError
from ._events import (
    CallEvent,
    Item,
    Log,
    OutputData,
    OutputEnded,
    OutputItem,
    OutputResult,
    OutputStarted,
    Progress,
    Result,
)

if TYPE_CHECKING:
    from ._conn import Connection

#: What one input value may be.
InputValue = (
    bytes | bytearray | memoryview | str | os.PathLike[str] | AsyncIterable[bytes] | Sequence[Any]
)
#: Inputs: ``[(media_urn, value), ...]`` or ``{media_urn: value}``.
Inputs = Sequence[tuple[str, InputValue]] | Mapping[str, InputValue]


#: Bytes of CHUNK payload queued between two yields of the sending task.
_YIELD_EVERY = 1 << 20


def normalize_inputs(inputs: Inputs | None) -> list[tuple[str, Any]]:
    """The inputs as a list of (media_urn, value) pairs.

    :raises TypeError: the shape is not one of the accepted ones.
    """
    if inputs is None:
        return []
    pairs = list(inputs.items()) if isinstance(inputs, Mapping) else list(inputs)
    out = []
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"each input must be a (media_urn, value) pair, got {pair!r}")
        out.append(pair)
    return out


class CallState:
    """The engine side of one call (internal; the caller sees :class:`Response`)."""

    def __init__(
        self,
        conn: Connection,
        *,
        cap: str,
        handler_cap: str,
        inputs: list[tuple[str, Any]],
        chain: Any,
        cancel_grace: float,
    ) -> None:
        self.conn = conn
        self.cap = cap
        self.handler_cap = handler_cap
        self.rid = MessageId.new()
        self.xid: MessageId | None = conn.next_xid()
        self.inputs = inputs
        self._chain = chain
        self._cancel_grace = cancel_grace
        self.receiver = P.BodyReceiver(
            self.rid, xid=self.xid, initial_credit=conn.limits.initial_credit, expect_req=False
        )
        self.events: deque[tuple[CallEvent, str | None]] = deque()
        self._wake = anyio.Event()
        self.done = False
        self.error: CallError | None = None
        self.end_meta: Mapping[str, Any] | None = None
        self.abandoned = False
        self.cancel_requested = False
        self._outputs: dict[str, tuple[str | None, str, bool]] = {}
        self._out_streams: dict[str, P.OutgoingStream] = {}
        self._current_out: P.OutgoingStream | None = None
        self._credit = anyio.Event()
        self._sender_scope = anyio.CancelScope()
        self._unyielded = 0

    # -- start -----------------------------------------------------------------------------

    def start(self) -> None:
        """Register with the connection, send the REQ (now, so that a cancel can never
        overtake it) and start the task that sends the arguments."""
        self.conn.calls[self.rid] = self
        self._send(frames.req(self.rid, self.cap, xid=self.xid))
        self.conn.spawn(self._send_inputs)

    async def _send_inputs(self) -> None:
        with self._sender_scope:
            index = 0
            media = ""
            try:
                for index, (media, value) in enumerate(self.inputs):
                    await self._send_one(f"arg-{index}", media, value)
                self._send(frames.end(self.rid, xid=self.xid, response=False))
            except (OSError, P.ProtocolError, TypeError, ValueError, cbor2.CBOREncodeError) as exc:
                self._abort_input(index, media, exc)
            except Exception as exc:  # an input iterator raised: the call fails, not the engine
                self._abort_input(index, media, exc)

    def _abort_input(self, index: int, media: str, exc: BaseException) -> None:
        if self.done:
            return
        self.conn.send(
            frames.cancel(
                self.rid,
                code="INVALID_REQUEST",
                attribution_class="input",
                message="the caller could not send an argument",
                xid=self.xid,
            )
        )
        self._finish(
            CallError(
                "INVALID_REQUEST",
                "input",
                f"input {index} ({media}) could not be sent: {type(exc).__name__}: {exc}",
                arg_urn=media or None,
            )
        )
        self.abandoned = True

    def _send(self, frame: Frame) -> None:
        self.conn.send(frame)

    async def _emit(self, stream: P.OutgoingStream, out: list[Frame]) -> None:
        for frame in out:
            if frame.frame_type is FrameType.CHUNK:
                while not stream.take_credit():
                    self._credit = anyio.Event()
                    await self._credit.wait()
                self._send(frame)
                # Let the writer and reader run now and then, but queue a small request's
                # frames together so that they leave in one write.
                self._unyielded += len(frame.payload or b"")
                if self._unyielded >= _YIELD_EVERY:
                    self._unyielded = 0
                    await anyio.lowlevel.checkpoint()
            else:
                self._send(frame)

    async def _send_one(self, stream_id: str, media: str, value: Any) -> None:
        limits = self.conn.limits
        size = limits.effective_chunk
        is_seq = isinstance(value, list | tuple)
        stream = P.OutgoingStream(
            self.rid,
            stream_id,
            media,
            xid=self.xid,
            max_chunk=size,
            initial_credit=limits.initial_credit,
            is_sequence=is_seq,
            coalesce=False,
        )
        self._out_streams[stream_id] = stream
        self._current_out = stream
        await self._emit(stream, stream.start())
        if isinstance(value, bytes | bytearray | memoryview):
            view = memoryview(value).cast("B")
            for pos in range(0, len(view), size):
                await self._emit(stream, stream.write_bytes(view[pos : pos + size]))
        elif isinstance(value, str):
            step = max(1, size // 4)
            for pos in range(0, len(value), step):
                await self._emit(stream, stream.emit_value(value[pos : pos + step]))
        elif isinstance(value, os.PathLike):
            async with await anyio.open_file(Path(value), "rb") as f:
                while block := await f.read(size):
                    await self._emit(stream, stream.write_bytes(block))
        elif is_seq:
            for item in value:
                if isinstance(item, Item):
                    await self._emit(stream, stream.emit_item(item.value, item.meta))
                else:
                    await self._emit(stream, stream.emit_item(item))
        elif isinstance(value, AsyncIterable):
            async for piece in value:
                if isinstance(piece, str):
                    piece = piece.encode("utf-8")
                view = memoryview(piece).cast("B")
                for pos in range(0, len(view), size):
                    await self._emit(stream, stream.write_bytes(view[pos : pos + size]))
        else:
            raise TypeError(f"unsupported input value type {type(value).__name__}")
        await self._emit(stream, stream.close())

    # -- frames from the cartridge ---------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        ft = frame.frame_type
        if ft is FrameType.CREDIT:
            stream = (
                self._out_streams.get(frame.stream_id) if frame.stream_id else self._current_out
            )
            if stream is not None and frame.credit:
                stream.grant(frame.credit)
                self._credit.set()
            return
        if self.done:
            self.conn.counters.stragglers += 1
            return
        if frame.routing_id != self.xid:
            self.conn.counters.protocol_errors += 1  # xid not copied back; routed by rid anyway
        try:
            events = self.receiver.receive(frame)
        except P.ProtocolError as exc:
            self.conn.counters.protocol_errors += 1
            self.conn.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.PROTOCOL_ERROR,
                    attribution_class="internal",
                    message=str(exc),
                    xid=self.xid,
                )
            )
            self._finish(
                CallError(
                    ErrorCode.PROTOCOL_ERROR,
                    "internal",
                    f"cartridge {self.conn.name} broke the protocol: {exc}",
                )
            )
            return
        credits = self.receiver.data_to_send()
        for credit in credits:
            self.conn.send(credit)
        # A CHUNK costs one credit, paid back when the caller takes its first event; one the
        # receiver already granted back (a continuation fragment) costs nothing.
        cost = frame.stream_id if ft is FrameType.CHUNK and not credits else None
        for ev in events:
            if isinstance(ev, P.StreamData | P.StreamItem):
                self._event(ev, cost)
                cost = None
            else:
                self._event(ev, None)
        if events:
            self._wake.set()

    def _event(self, ev: Any, cost: str | None) -> None:
        if isinstance(ev, P.StreamData):
            out = self._outputs.get(ev.stream_id)
            self._queue(
                OutputData(output=out[0] if out else None, stream_id=ev.stream_id, value=ev.value),
                cost,
            )
        elif isinstance(ev, P.StreamItem):
            out = self._outputs.get(ev.stream_id)
            self._queue(
                OutputItem(
                    output=out[0] if out else None,
                    stream_id=ev.stream_id,
                    value=ev.value,
                    meta=ev.meta,
                ),
                cost,
            )
        elif isinstance(ev, P.StreamOpened):
            self._outputs[ev.stream_id] = (ev.output, ev.media_urn, ev.is_sequence)
            self._queue(
                OutputStarted(
                    output=ev.output,
                    stream_id=ev.stream_id,
                    media_urn=ev.media_urn,
                    is_sequence=ev.is_sequence,
                    unbounded=ev.unbounded,
                    meta=ev.meta,
                ),
                None,
            )
        elif isinstance(ev, P.StreamClosed):
            out = self._outputs.get(ev.stream_id)
            self._queue(
                OutputEnded(
                    output=out[0] if out else None,
                    stream_id=ev.stream_id,
                    chunk_count=ev.chunk_count,
                ),
                None,
            )
        elif isinstance(ev, P.ProgressReceived):
            self._queue(Progress(progress=ev.progress, message=ev.message), None)
        elif isinstance(ev, P.LogReceived):
            self._queue(
                Log(
                    level=ev.level,
                    message=ev.message,
                    attribution_class=ev.attribution_class,
                    arg_urn=ev.arg_urn,
                ),
                None,
            )
        elif isinstance(ev, P.BodyEnded):
            self.end_meta = ev.meta
            self._finish(None)
        elif isinstance(ev, P.ErrorReceived):
            self._finish(
                CallError(
                    ev.code or "HANDLER_ERROR",
                    ev.attribution_class or "internal",
                    ev.message,
                    ev.arg_urn,
                )
            )

    def _queue(self, ev: CallEvent, credit_stream: str | None) -> None:
        if self.abandoned:
            if credit_stream is not None:
                self.receiver.consumed(credit_stream)
            return
        self.events.append((ev, credit_stream))

    def on_death(self, error: CallError) -> None:
        if self.done:
            return
        if self.cancel_requested:
            error = CallError(
                ErrorCode.CANCELLED,
                "user",
                f"Cancelled by user (cartridge {self.conn.name} was killed)",
            )
        self._finish(error)

    def _finish(self, error: CallError | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        self._sender_scope.cancel()
        self._credit.set()
        self.conn.forget(self.rid)
        if self._chain is not None:
            self.conn.gate.release(self._chain)
            self._chain = None
        self._wake.set()

    # -- caller side -----------------------------------------------------------------------

    async def next_event(self) -> CallEvent | None:
        """The next event, ``None`` after END. :raises CallError: on ERR or death."""
        while not self.events:
            if self.done:
                if self.error is not None:
                    raise self.error
                return None
            self.receiver.flush_credit()
            for credit in self.receiver.data_to_send():
                self.conn.send(credit)
            self._wake = anyio.Event()
            await self._wake.wait()
        ev, credit_stream = self.events.popleft()
        if credit_stream is not None and not self.done:
            self.receiver.consumed(credit_stream)
            for credit in self.receiver.data_to_send():
                self.conn.send(credit)
        return ev

    def cancel(
        self,
        *,
        force_kill: bool = False,
        code: str = ErrorCode.CANCELLED,
        attribution_class: str = "user",
        message: str = "Cancelled by user",
    ) -> None:
        if self.done or self.cancel_requested:
            return
        self.cancel_requested = True
        self._sender_scope.cancel()
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
        if force_kill:
            self.conn.spawn(self._kill_later)

    async def _kill_later(self) -> None:
        with anyio.move_on_after(self._cancel_grace):
            while not self.done:
                self._wake = anyio.Event()
                await self._wake.wait()
        if not self.done:
            self.conn.kill(f"killed by the engine: cancel(force_kill=True) of a call to {self.cap}")

    def abandon(self) -> None:
        """The caller left without reading to the end: cancel and discard the rest."""
        if self.done:
            return
        self.abandoned = True
        self.events.clear()
        self.cancel(message="the caller abandoned the call")


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
    def end_meta(self) -> Mapping[str, Any] | None:
        """END's meta (``exit_code``, ``progress``, ``message``) once the call ended."""
        return self._state.end_meta

    def __aiter__(self) -> Response:
        return self

    async def __anext__(self) -> CallEvent:
        ev = await self._state.next_event()
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
        logs: list[Log] = []
        progress: list[Progress] = []
        async for ev in self:
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
                logs.append(ev)
            elif isinstance(ev, Progress):
                progress.append(ev)
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
            outputs=outputs, logs=tuple(logs), progress=tuple(progress), end_meta=self.end_meta
        )

    async def cancel(self, force_kill: bool = False) -> None:
        """Ask the cartridge to cancel the call (CANCELLED, class user).

        The response then ends with :class:`CallError` ``CANCELLED``. With ``force_kill``, the
        process is killed if the cartridge has not ended the call within the configured grace.
        """
        self._state.cancel(force_kill=force_kill)
        await anyio.lowlevel.checkpoint()
