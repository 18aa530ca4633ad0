"""A call's arguments: accepted shapes, and how they become STREAM_START/CHUNK/STREAM_END.

Two ways to send
----------------
*Small in-memory inputs* (bytes, text or item lists whose chunks fit the stream's initial
credit, up to :data:`INLINE_MAX` bytes in all) are turned into frames at once by
:func:`inline_frames`; the call queues them right behind its REQ, synchronously, when it
opens. Nothing of the call can then ever reach the wire before its REQ, no task is started,
and the whole request usually leaves in one ``writev``.

*Everything else* (large values, files, async iterables) is sent by :class:`InputSender`, a
task in the connection's task group that sends one stream after the other, each CHUNK only
when the stream has credit (CREDIT from the cartridge wakes it), yielding now and then so
that a large input does not starve the reader.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel
import attrs

from .. import protocol as P
from .._redact import describe
from ..protocol import Frame, FrameType, MessageId
from ._events import Item
from ._file_blocks import file_blocks


@attrs.frozen
class CborValue:
    """One scalar input sent as a CBOR value (an int, a map, ...): the stream carries the value
    itself, not bytes that encode it."""

    value: Any


class Verified(NamedTuple):
    """A piece of a :class:`ValueStream` that arrived in one CHUNK whose checksum was verified
    (``OutputData.wire``): sent on as the same payload with the same checksum, not hashed
    again, where the stream would send exactly that payload."""

    data: bytes
    checksum: int
    size: int


@attrs.frozen
class ValueStream:
    """A scalar input whose pieces arrive later: each ``bytes`` piece is sent as bytes, any
    other piece (text included) as a CBOR value, one CHUNK (or more, when large) per piece."""

    source: AsyncIterable[Any] = attrs.field(repr=False)


@attrs.frozen
class ItemStream:
    """A sequence input whose items arrive later (each an :class:`Item` or a plain value)."""

    source: AsyncIterable[Any] = attrs.field(repr=False)


#: What one input value may be.
InputValue = (
    bytes
    | bytearray
    | memoryview
    | str
    | os.PathLike[str]
    | AsyncIterable[bytes]
    | Sequence[Any]
    | CborValue
    | ValueStream
    | ItemStream
)
#: Inputs: ``[(media_urn, value), ...]`` or ``{media_urn: value}``.
Inputs = Sequence[tuple[str, InputValue]] | Mapping[str, InputValue]

#: Most payload bytes (over all inputs) a call queues inline when it opens.
INLINE_MAX = 1 << 20
#: Bytes of CHUNK payload the sending task queues between two yields.
YIELD_EVERY = 1 << 20

_BYTES_LIKE = (bytes, bytearray, memoryview)


def normalize_inputs(inputs: Inputs | None) -> list[tuple[str, Any]]:
    """The inputs as a list of (media_urn, value) pairs.

    :raises TypeError: the shape is not one of the accepted ones.
    """
    if inputs is None:
        return []
    if type(inputs) is list:  # the usual shape, without an ABC check
        pairs = list(inputs)
    else:
        pairs = list(inputs.items()) if isinstance(inputs, Mapping) else list(inputs)
    for index, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(
                f"input {index}: each input must be a (media_urn, value) pair, got {describe(pair)}"
            )
    return pairs


def _stream(
    rid: MessageId, xid: MessageId | None, limits: P.Limits, index: int, media: str, seq: bool
) -> P.OutgoingStream:
    return P.OutgoingStream(
        rid,
        f"arg-{index}",
        media,
        xid=xid,
        max_chunk=limits.effective_chunk,
        initial_credit=limits.initial_credit,
        is_sequence=seq,
        coalesce=False,
    )


def inline_frames(
    inputs: list[tuple[str, Any]], rid: MessageId, xid: MessageId | None, limits: P.Limits
) -> list[Frame] | None:
    """Every frame of the request body after the REQ (streams, then the requester END), or
    ``None`` when the inputs are not small in-memory values that fit the initial credit.

    :raises Exception: a value could not be encoded (e.g. an item CBOR cannot represent).
    """
    size = limits.effective_chunk
    credit = limits.initial_credit
    total = 0
    for _media, value in inputs:
        if isinstance(value, _BYTES_LIKE):
            n = memoryview(value).nbytes
            if -(-n // size) > credit:
                return None
        elif isinstance(value, str):
            n = len(value) * 4  # at most 4 UTF-8 bytes per character
            if -(-n // size) > credit:
                return None
        elif isinstance(value, list | tuple):
            if len(value) > credit:
                return None
            n = sum(len(x) for x in value if isinstance(x, bytes | bytearray | str))
        else:
            return None
        total += n
        if total > INLINE_MAX:
            return None
    out: list[Frame] = []
    frames = P.frames
    for index, (media, value) in enumerate(inputs):
        if type(value) is bytes and 0 < len(value) <= size and credit > 0:
            # The common small argument: its stream in one CHUNK, built directly (the same
            # frames an OutgoingStream makes, without the stream object).
            sid = f"arg-{index}"
            out.append(frames.stream_start(rid, sid, media, xid=xid, is_sequence=False))
            (payload,) = P.scalar_payloads(value, size)
            out.append(frames.chunk(rid, sid, 0, payload, xid=xid))
            out.append(frames.stream_end(rid, sid, 1, xid=xid))
            continue
        is_seq = isinstance(value, list | tuple)
        stream = _stream(rid, xid, limits, index, media, is_seq)
        first = len(out)
        out += stream.start()
        if isinstance(value, _BYTES_LIKE):
            view = memoryview(value).cast("B") if not isinstance(value, bytes) else value
            if len(view) <= size:
                out += stream.write_bytes(view)
            else:
                for pos in range(0, len(view), size):
                    out += stream.write_bytes(view[pos : pos + size])
        elif isinstance(value, str):  # text travels as UTF-8 in byte strings (REQ-38)
            data = value.encode("utf-8")
            for pos in range(0, max(len(data), 1), size):
                out += stream.write_bytes(data[pos : pos + size])
        else:
            for item in value:
                if isinstance(item, Item):
                    out += stream.emit_item(item.value, item.meta)
                else:
                    out += stream.emit_item(item)
        out += stream.close()
        chunks = 0
        for i in range(first, len(out)):
            chunks += out[i].frame_type is FrameType.CHUNK
        if chunks > credit:
            return None
        for _ in range(chunks):
            stream.take_credit()
    out.append(frames.end(rid, xid=xid, response=False))
    return out


def request_flow(
    cap: str, inputs: list[tuple[str, Any]], rid: MessageId, xid: MessageId | None, limits: P.Limits
) -> list[Frame] | None:
    """Every frame of a request to ``cap``, REQ to END, when its inputs are small in-memory
    values (:func:`inline_frames`); ``None`` otherwise, and when a value cannot be encoded
    (the :class:`InputSender` then reports which one)."""
    # Small byte strings only: the whole flow made in one call when compiled.
    body = P.request_frames(
        rid, xid, cap, inputs, limits.effective_chunk, limits.initial_credit, INLINE_MAX
    )
    if body is not None:
        return body
    try:
        body = inline_frames(inputs, rid, xid, limits)
    except Exception:  # an input that cannot be encoded: the sender reports which one
        return None
    if body is not None:
        body.insert(0, P.frames.req(rid, cap, xid=xid))
    return body


class InputSender:
    """The task that streams a call's inputs under credit (the path for big or lazy inputs)."""

    def __init__(
        self,
        inputs: list[tuple[str, Any]],
        rid: MessageId,
        xid: MessageId | None,
        limits: P.Limits,
        send: Callable[[Frame], None],
    ) -> None:
        self.inputs = inputs
        self.rid = rid
        self.xid = xid
        self.limits = limits
        self._send = send
        self.streams: dict[str, P.OutgoingStream] = {}
        self.current: P.OutgoingStream | None = None
        self.scope = anyio.CancelScope()
        self._credit: anyio.Event | None = None
        self._unyielded = 0
        #: Where the sending stopped: (input index, media URN) of the value being sent.
        self.position: tuple[int, str] = (0, "")

    def grant(self, stream_id: str | None, n: int) -> None:
        """CREDIT for one of our streams arrived (no stream id: the current one)."""
        stream = self.streams.get(stream_id) if stream_id else self.current
        if stream is not None and n:
            stream.grant(n)
            if self._credit is not None:
                self._credit.set()

    def stop(self) -> None:
        self.scope.cancel()
        if self._credit is not None:
            self._credit.set()

    async def run(self) -> None:
        """Send every input, then the requester END. Exceptions propagate to the caller."""
        for index, (media, value) in enumerate(self.inputs):
            self.position = (index, media)
            await self._send_one(index, media, value)
        self._send(P.frames.end(self.rid, xid=self.xid, response=False))

    async def _emit(self, stream: P.OutgoingStream, out: list[Frame]) -> None:
        for frame in out:
            if frame.frame_type is FrameType.CHUNK:
                while not stream.take_credit():
                    self._credit = anyio.Event()
                    await self._credit.wait()
                self._send(frame)
                # Let the writer and reader run now and then.
                self._unyielded += len(frame.payload or b"")
                if self._unyielded >= YIELD_EVERY:
                    self._unyielded = 0
                    await anyio.lowlevel.checkpoint()
            else:
                self._send(frame)

    async def _send_one(self, index: int, media: str, value: Any) -> None:
        size = self.limits.effective_chunk
        is_seq = isinstance(value, list | tuple | ItemStream)
        stream = _stream(self.rid, self.xid, self.limits, index, media, is_seq)
        self.streams[stream.stream_id] = stream
        self.current = stream
        if isinstance(value, os.PathLike):
            await self._send_file(stream, Path(value))
            return
        await self._emit(stream, stream.start())
        if isinstance(value, _BYTES_LIKE):
            view = memoryview(value).cast("B")
            for pos in range(0, len(view), size):
                await self._emit(stream, stream.write_bytes(view[pos : pos + size]))
        elif isinstance(value, str):  # text travels as UTF-8 in byte strings
            data = value.encode("utf-8")
            for pos in range(0, len(data), size):
                await self._emit(stream, stream.write_bytes(data[pos : pos + size]))
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Item):
                    await self._emit(stream, stream.emit_item(item.value, item.meta))
                else:
                    await self._emit(stream, stream.emit_item(item))
        elif isinstance(value, CborValue):
            await self._emit(stream, stream.emit_value(value.value))
        elif isinstance(value, ValueStream):
            async for piece in value.source:
                if type(piece) is Verified:
                    await self._emit(stream, stream.write_verified(*piece))
                elif isinstance(piece, _BYTES_LIKE):
                    view = memoryview(piece).cast("B")
                    for pos in range(0, len(view), size):
                        await self._emit(stream, stream.write_bytes(view[pos : pos + size]))
                else:
                    await self._emit(stream, stream.emit_value(piece))
        elif isinstance(value, ItemStream):
            async for item in value.source:
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

    async def _send_file(self, stream: P.OutgoingStream, path: Path) -> None:
        """A file's bytes; a regular file's size goes into the stream meta (``size``), so the
        handler can report progress as a fraction (``/dev/stdin`` works too)."""
        async with await anyio.open_file(path, "rb") as f:
            fd = f.wrapped.fileno()
            info = os.fstat(fd)
            regular = stat.S_ISREG(info.st_mode)
            await self._emit(stream, stream.start(meta={"size": info.st_size} if regular else None))
            size = self.limits.effective_chunk
            if regular:
                # Large blocks, read in the loop while the page cache holds them (file_blocks).
                async for view in file_blocks(fd):
                    for pos in range(0, len(view), size):
                        await self._emit(stream, stream.write_bytes(view[pos : pos + size]))
            else:
                while block := await f.read(size):
                    await self._emit(stream, stream.write_bytes(block))
        await self._emit(stream, stream.close())
