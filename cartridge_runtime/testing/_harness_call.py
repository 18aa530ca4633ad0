"""The harness's call side: argument shapes (:class:`Input`, :class:`Item`), how they become
credit-paced streams, what a call gathers (:class:`CallResult`), and the pending call
(:class:`HarnessCall`) that :meth:`CartridgeHarness.start_call` returns.

Kept apart from :mod:`._harness` (the host loop) so each stays about one concern.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import cbor2

from cartridge_runtime._item import Item as Item  # re-exported for the harness
from cartridge_runtime._redact import describe, describe_items, describe_meta, describe_values
from cartridge_runtime.protocol import (
    BodyEnded,
    BodyReceiver,
    ErrorReport,
    Frame,
    FrameType,
    Limits,
    LogReceived,
    MessageId,
    OutgoingStream,
    ProgressReceived,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
    frames,
)


@attrs.frozen
class Input:
    """One argument with explicit stream options (a plain ``(media_urn, value)`` tuple is the
    same with the defaults).

    :param value: ``bytes``-like or ``str`` (a scalar stream), a ``list``/``tuple`` of items (a
        sequence stream; items may be :class:`Item` or ``(value, meta)`` pairs whose meta is a
        mapping or ``None``), or an async iterable of ``bytes``/``str`` pieces (streamed as they
        come, credit-paced; with ``is_sequence=True`` each piece is one item instead).
    :param unbounded: mark the stream unbounded (STREAM_START key ``unbounded``, no chunk count
        in STREAM_END).
    :param is_sequence: ``None`` decides by the value (lists and tuples are sequences); ``True``
        makes a scalar value a one-item sequence; ``False`` with a list is refused.
    :param meta: stream meta for STREAM_START.
    """

    media_urn: str
    value: Any = attrs.field(repr=describe)
    unbounded: bool = False
    is_sequence: bool | None = None
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)


#: What ``call()`` / ``start_call()`` accept as one argument.
InputSpec = tuple[str, Any] | Input

_BYTES_LIKE = (bytes, bytearray, memoryview)


def as_input(spec: Any) -> Input:
    """``spec`` as an :class:`Input`.

    :raises TypeError: neither an :class:`Input` nor a ``(media_urn, value)`` pair, or a
        contradictory ``is_sequence``.
    """
    if isinstance(spec, Input):
        inp = spec
    elif isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        inp = Input(spec[0], spec[1])
    else:
        raise TypeError(
            f"an input must be Input(...) or a (media_urn, value) pair, got {describe(spec)}"
        )
    if inp.is_sequence is False and isinstance(inp.value, list | tuple):
        raise TypeError(f"input {inp.media_urn}: is_sequence=False but the value is a list")
    return inp


def split_item(item: Any) -> tuple[Any, Mapping[str, Any] | None]:
    """(value, meta) of one sequence item given as a plain value, an :class:`Item` or a
    ``(value, meta)`` pair (meta a mapping or ``None``)."""
    if isinstance(item, Item):
        return item.value, item.meta
    if (
        isinstance(item, tuple)
        and len(item) == 2
        and (item[1] is None or isinstance(item[1], Mapping))
    ):
        return item[0], item[1]
    return item, None


@attrs.define
class StreamResult:
    """One response stream as received."""

    stream_id: str
    media_urn: str
    output: str | None = None
    is_sequence: bool = False
    unbounded: bool = False
    meta: Any = attrs.field(default=None, repr=describe_meta)
    values: list[Any] = attrs.field(factory=list, repr=describe_values)
    items: list[Item] = attrs.field(factory=list, repr=describe_items)
    chunk_count: int | None = None
    closed: bool = False

    @property
    def data(self) -> bytes:
        """The stream's bytes by the byte-collector rule."""
        out = []
        for v in self.values:
            out.append(
                v if isinstance(v, bytes) else v.encode() if isinstance(v, str) else cbor2.dumps(v)
            )
        return b"".join(out)

    @property
    def text(self) -> str:
        """:attr:`data` as UTF-8 text."""
        return self.data.decode("utf-8")


@attrs.define
class CallResult:
    """Everything a request got back."""

    rid: MessageId
    streams: list[StreamResult] = attrs.field(factory=list)
    logs: list[LogReceived] = attrs.field(factory=list)
    progress: list[tuple[float | None, str]] = attrs.field(factory=list)
    end: Any = attrs.field(default=None, repr=describe_meta)
    error: ErrorReport | None = None
    frames: list[Frame] = attrs.field(factory=list, repr=describe_items)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end is not None

    @property
    def main(self) -> StreamResult | None:
        return next((s for s in self.streams if s.output is None), None)

    @property
    def main_bytes(self) -> bytes:
        m = self.main
        return m.data if m is not None else b""

    # The names and shapes of the engine's Result: ``data``, ``items``, ``outputs``,
    # ``end_meta``, ``message``.

    @property
    def data(self) -> bytes:
        """The main output's bytes (``b""`` when there is none), as ``Result.data``."""
        return self.main_bytes

    @property
    def items(self) -> list[Any]:
        """The main output's sequence item values, as ``Result.items``."""
        m = self.main
        return [item.value for item in m.items] if m is not None else []

    @property
    def outputs(self) -> dict[str | None, StreamResult]:
        """Every output stream keyed as ``Result.outputs`` is: ``None`` for the main output,
        else the media URN the cartridge gave in STREAM_START key 21."""
        return {s.output: s for s in self.streams}

    @property
    def end_meta(self) -> Any:
        """END's meta, as ``Result.end_meta`` (``None`` before END or after ERR)."""
        return self.end

    @property
    def message(self) -> str | None:
        """END's message, as ``Result.message``."""
        return (self.end or {}).get("message")

    def output(self, media_urn: str) -> StreamResult | None:
        """The stream whose key 21 (or, for the main output, media) is ``media_urn``."""
        return next((s for s in self.streams if media_urn in (s.output, s.media_urn)), None)

    def raise_for_error(self) -> CallResult:
        if self.error is not None:
            raise AssertionError(f"request failed: {self.error}")
        return self


class HarnessCall:
    """A request the harness sent and is still gathering (from :meth:`CartridgeHarness.start_call`).

    ``await call.result()`` waits for its END or ERR; ``await call.cancel(...)`` sends CANCEL.
    ``call.partial`` is the :class:`CallResult` gathered so far. To the engine's connection it
    is the flow of its request id: the connection routes every response frame and CREDIT here
    (:meth:`on_frame`).

    :param send: queues one frame to the cartridge as it is (its own seq).
    :param release: called with the request id once the call ended (END/ERR) or was
        abandoned: the connection stops routing to it, and counts what comes later as late.
    """

    def __init__(
        self,
        rid: MessageId,
        xid: MessageId | None,
        limits: Limits,
        send: Callable[[Frame], None],
        release: Callable[[MessageId], None],
    ) -> None:
        self.rid = rid
        self.xid = xid
        self.partial = CallResult(rid=rid)
        self.receiver = BodyReceiver(
            rid, xid=xid, initial_credit=limits.initial_credit, expect_req=False
        )
        self.args: dict[str, OutgoingStream] = {}
        self.credit_event = anyio.Event()
        self.done = anyio.Event()
        self.by_id: dict[str, StreamResult] = {}
        self._limits = limits
        self._send = send
        self._release: Callable[[MessageId], None] | None = release
        self._ended = False  # the cartridge ended: no credit will come

    def __repr__(self) -> str:
        return f"HarnessCall(rid={self.rid!r}, finished={self.finished})"

    @property
    def finished(self) -> bool:
        """True once END or ERR arrived."""
        return self.done.is_set()

    async def result(self, timeout: float = 30) -> CallResult:  # noqa: ASYNC109 (wraps fail_after)
        """The call's result once END or ERR arrived.

        :raises TimeoutError: nothing terminal within ``timeout`` seconds.
        """
        with anyio.fail_after(timeout):
            await self.done.wait()
        return self.partial

    async def cancel(
        self,
        code: str | None = None,
        attribution_class: str | None = None,
        message: str | None = None,
        force_kill: bool = False,
    ) -> None:
        """Send CANCEL for this request (reason meta only when one is given). The ERR that
        answers it ends the call as usual; read it with :meth:`result`."""
        self._send(
            frames.cancel(
                self.rid,
                force_kill=force_kill,
                code=code,
                attribution_class=attribution_class,
                message=message,
                xid=self.xid,
            )
        )

    # -- the flow of the request (frames the connection routes here) ----------------------

    def on_frame(self, f: Frame) -> None:
        """One frame for this request: CREDIT for an argument, or a response frame checked by
        the :class:`BodyReceiver` and gathered into :attr:`partial`."""
        if f.frame_type is FrameType.CREDIT:
            self.grant(f.stream_id, f.credit or 0)
            return
        res = self.partial
        res.frames.append(f)
        receiver = self.receiver
        by_id = self.by_id
        for ev in receiver.receive(f):
            if isinstance(ev, StreamOpened):
                s = StreamResult(
                    ev.stream_id, ev.media_urn, ev.output, ev.is_sequence, ev.unbounded, ev.meta
                )
                by_id[ev.stream_id] = s
                res.streams.append(s)
            elif isinstance(ev, StreamData):
                by_id[ev.stream_id].values.append(ev.value)
                receiver.consumed(ev.stream_id)
            elif isinstance(ev, StreamItem):
                by_id[ev.stream_id].values.append(ev.value)
                by_id[ev.stream_id].items.append(Item(ev.value, ev.meta))
                receiver.consumed(ev.stream_id)
            elif isinstance(ev, StreamClosed):
                s = by_id[ev.stream_id]
                s.closed, s.chunk_count = True, ev.chunk_count
            elif isinstance(ev, LogReceived):
                res.logs.append(ev)
            elif isinstance(ev, ProgressReceived):
                res.progress.append((None if ev.indeterminate else ev.progress, ev.message))
            elif isinstance(ev, BodyEnded):
                res.end = ev.meta
            elif isinstance(ev, ErrorReport):
                res.error = ev
        receiver.flush_credit()
        for c in receiver.data_to_send():
            self._send(c)
        if f.frame_type.is_terminal:
            self.abandon()
            self.done.set()
            self.credit_event.set()

    def abandon(self) -> None:
        """Release the request's flow (once): frames that come for it later are late, counted
        by the connection and never gathered here."""
        release, self._release = self._release, None
        if release is not None:
            release(self.rid)

    def on_death(self, error: Exception) -> None:
        """The cartridge ended with the call pending: it stays unfinished, as on a wire that
        went quiet (``result()`` times out); arguments stop waiting for credit."""
        self._ended = True
        self.credit_event.set()

    def grant(self, stream_id: str | None, n: int) -> None:
        """CREDIT for one of the argument streams (no stream id: the first)."""
        target = self.args.get(stream_id) if stream_id else next(iter(self.args.values()), None)
        if target is not None:
            target.grant(n)
            self.credit_event.set()
            self.credit_event = anyio.Event()

    # -- sending arguments -------------------------------------------------------------------

    async def send_inputs(self, inputs: Sequence[Any]) -> None:
        """Send every argument as its own stream, each CHUNK only under credit; stops early
        once the call ended.

        :raises TypeError: an argument of an unsupported shape.
        """
        specs = [as_input(spec) for spec in inputs]
        for i, inp in enumerate(specs):
            if self.finished:
                return
            await self._send_one(i, inp)

    async def _send_one(self, index: int, inp: Input) -> None:
        value = inp.value
        is_seq = inp.is_sequence if inp.is_sequence is not None else isinstance(value, list | tuple)
        og = OutgoingStream(
            self.rid,
            f"arg-{index}",
            inp.media_urn,
            xid=self.xid,
            max_chunk=self._limits.effective_chunk,
            initial_credit=self._limits.initial_credit,
            is_sequence=is_seq,
            unbounded=inp.unbounded,
            meta=inp.meta,
            coalesce=False,  # a piece goes out when it is given (live/unbounded inputs)
        )
        self.args[og.stream_id] = og
        await self._paced(og, og.start())
        step = og.max_chunk
        if isinstance(value, list | tuple):
            for item in value:
                v, meta = split_item(item)
                if not await self._paced(og, og.emit_item(v, meta)):
                    return
        elif isinstance(value, AsyncIterable):
            async for piece in value:
                if is_seq:
                    v, meta = split_item(piece)
                    sent = await self._paced(og, og.emit_item(v, meta))
                else:
                    sent = await self._scalar(og, piece, step)
                if not sent:
                    return
        elif is_seq:
            v, meta = split_item(value)
            if not await self._paced(og, og.emit_item(v, meta)):
                return
        elif isinstance(value, (*_BYTES_LIKE, str)):
            if not await self._scalar(og, value, step):
                return
        else:
            raise TypeError(f"input {inp.media_urn}: unsupported value type {type(value).__name__}")
        await self._paced(og, og.close())

    async def _scalar(self, og: OutgoingStream, piece: Any, step: int) -> bool:
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        if not isinstance(piece, _BYTES_LIKE):
            raise TypeError(
                f"a streamed scalar piece must be bytes or str, got {type(piece).__name__}"
            )
        view = memoryview(piece).cast("B")
        for pos in range(0, len(view), step):
            if not await self._paced(og, og.write_bytes(view[pos : pos + step])):
                return False
        return True

    async def _paced(self, og: OutgoingStream, out: list[Frame]) -> bool:
        """Send ``out``, waiting for credit before each CHUNK; False once the call ended."""
        for f in out:
            if f.frame_type is FrameType.CHUNK:
                while not og.take_credit():
                    if self.finished or self._ended:
                        return False
                    await self.credit_event.wait()
            self._send(f)
            await anyio.lowlevel.checkpoint()  # let the writer and the reader run
        return True
