"""The receiving side of one request or response, as a table-driven state machine.

Theory of operation
-------------------
A :class:`BodyReceiver` sees the flow frames of one request (REQ, STREAM_START, CHUNK,
STREAM_END, LOG, END, ERR) as its receiver does: a cartridge receiving a request
(``expect_req=True``), or a requester receiving the response (``expect_req=False``).

Two tables decide what is legal. :data:`REQUEST_TRANSITIONS` maps (request state, input) to
the next request state; :data:`STREAM_TRANSITIONS` maps (stream state, input) to the next
stream state. A pair that is in neither table is a protocol error: the receiver moves to
``FAILED`` and raises :class:`StreamStateError` (or a more precise subclass). Nothing else
changes state.

Flow control (FLW-1..FLW-8): each stream starts with ``initial_credit`` credits; every CHUNK
spends one, and a CHUNK that arrives with none left is a :class:`CreditViolationError`. When
the consumer reports a chunk consumed (:meth:`BodyReceiver.consumed`), a pending counter
grows; at ``max(1, window // 2)`` a CREDIT for that batch is queued. :meth:`flush_credit` sends
whatever is pending (the consumer calls it before it blocks). Continuation fragments of a
sequence item are granted back at once. Outgoing CREDIT frames are collected in
:meth:`data_to_send`.
"""

from __future__ import annotations

import enum
import os
from typing import Any

import attrs

from . import _builders as build
from ._checksum import checksum
from ._constants import PURE_PYTHON_ENV, CreditDirection, FrameType
from ._errors import ChecksumMismatchError, CreditViolationError, ProtocolError, StreamStateError
from ._events import (
    BodyEnded,
    ErrorReport,
    Event,
    LogReceived,
    ProgressReceived,
    RequestOpened,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
)
from ._frame import Frame, MessageId
from ._payload import SequenceAssembler, decode_scalar
from ._telemetry import METRIC_LEVEL, TRACE_LEVEL


class RequestState(enum.Enum):
    # Members are singletons compared by identity: hash them by identity too (a C-level
    # hash; Enum's own hashes the name in Python, on every transition-table lookup).
    __hash__ = object.__hash__

    EXPECT_REQ = "expect-req"  #: nothing seen yet; only a REQ may come
    OPEN = "open"  #: streams, chunks and logs may come
    DONE = "done"  #: END seen; nothing more may come
    FAILED = "failed"  #: ERR seen or a protocol error happened


class StreamState(enum.Enum):
    # Members are singletons compared by identity: hash them by identity too (a C-level
    # hash; Enum's own hashes the name in Python, on every transition-table lookup).
    __hash__ = object.__hash__

    NEW = "new"  #: no STREAM_START yet for this id
    OPEN = "open"  #: between items (or in scalar mode)
    IN_ITEM = "in-item"  #: a sequence item is partially received
    CLOSED = "closed"  #: STREAM_END seen


class RequestInput(enum.Enum):
    # Members are singletons compared by identity: hash them by identity too (a C-level
    # hash; Enum's own hashes the name in Python, on every transition-table lookup).
    __hash__ = object.__hash__

    REQ = "REQ"
    STREAM_START = "STREAM_START"
    CHUNK = "CHUNK"
    STREAM_END = "STREAM_END"
    LOG = "LOG"
    END = "END"
    ERR = "ERR"
    #: internal input: a sequence chunk left part of an item buffered
    ITEM_INCOMPLETE = "item-incomplete"
    #: internal input: a sequence chunk completed every buffered item
    ITEM_COMPLETE = "item-complete"


_R, _S, _I = RequestState, StreamState, RequestInput

#: (request state, input) -> next request state.
REQUEST_TRANSITIONS: dict[tuple[RequestState, RequestInput], RequestState] = {
    (_R.EXPECT_REQ, _I.REQ): _R.OPEN,
    (_R.OPEN, _I.STREAM_START): _R.OPEN,
    (_R.OPEN, _I.CHUNK): _R.OPEN,
    (_R.OPEN, _I.STREAM_END): _R.OPEN,
    (_R.OPEN, _I.LOG): _R.OPEN,
    (_R.OPEN, _I.END): _R.DONE,
    (_R.OPEN, _I.ERR): _R.FAILED,
    # A requester may give up before it sent anything but the REQ.
    (_R.EXPECT_REQ, _I.ERR): _R.FAILED,
}

#: (stream state, input) -> next stream state.
STREAM_TRANSITIONS: dict[tuple[StreamState, RequestInput], StreamState] = {
    (_S.NEW, _I.STREAM_START): _S.OPEN,
    (_S.OPEN, _I.CHUNK): _S.OPEN,
    (_S.IN_ITEM, _I.CHUNK): _S.IN_ITEM,
    (_S.OPEN, _I.ITEM_INCOMPLETE): _S.IN_ITEM,
    (_S.IN_ITEM, _I.ITEM_INCOMPLETE): _S.IN_ITEM,
    (_S.OPEN, _I.ITEM_COMPLETE): _S.OPEN,
    (_S.IN_ITEM, _I.ITEM_COMPLETE): _S.OPEN,
    (_S.OPEN, _I.STREAM_END): _S.CLOSED,
}

#: LOG levels whose data rides under the meta key of the same name (REQ-39).
_TELEMETRY_LEVELS = frozenset((METRIC_LEVEL, TRACE_LEVEL))

_INPUTS = {
    FrameType.REQ: RequestInput.REQ,
    FrameType.STREAM_START: RequestInput.STREAM_START,
    FrameType.CHUNK: RequestInput.CHUNK,
    FrameType.STREAM_END: RequestInput.STREAM_END,
    FrameType.LOG: RequestInput.LOG,
    FrameType.END: RequestInput.END,
    FrameType.ERR: RequestInput.ERR,
}

_STREAM_MISTAKES = {
    (_S.NEW, _I.CHUNK): "stream not open",
    (_S.NEW, _I.STREAM_END): "stream not open",
    (_S.CLOSED, _I.CHUNK): "stream not open",
    (_S.CLOSED, _I.STREAM_END): "stream not open",
    (_S.OPEN, _I.STREAM_START): "stream restarted",
    (_S.IN_ITEM, _I.STREAM_START): "stream restarted",
    (_S.CLOSED, _I.STREAM_START): "stream restarted",
    (_S.IN_ITEM, _I.STREAM_END): "STREAM_END inside a sequence item",
}


class _Stream:
    __slots__ = (
        "assembler",
        "chunks",
        "is_sequence",
        "item_meta",
        "pending",
        "state",
        "stream_id",
        "unbounded",
        "window",
    )

    def __init__(self, stream_id: str, window: int, is_sequence: bool, unbounded: bool) -> None:
        self.stream_id = stream_id
        self.state = StreamState.NEW
        self.window = window
        self.pending = 0
        self.chunks = 0
        self.is_sequence = is_sequence
        self.unbounded = unbounded
        self.assembler = SequenceAssembler() if is_sequence else None
        self.item_meta: Any = None


class BodyReceiver:
    """Validates and decodes the frames one receiver gets for one request id.

    :param rid: the request id; frames for other ids are refused.
    :param xid: the routing id copied onto CREDIT frames this receiver queues.
    :param initial_credit: the negotiated per-stream window.
    :param expect_req: ``True`` on the handler side (a REQ comes first).
    :param credit_dir: the ``credit_dir`` word of queued grants; defaults to ``request`` on the
        handler side and ``response`` on the requester side.
    :param verify_checksums: check FNV-1a 64 of every CHUNK (on by default).
    """

    def __init__(
        self,
        rid: MessageId,
        *,
        xid: MessageId | None = None,
        initial_credit: int,
        expect_req: bool,
        credit_dir: CreditDirection | None = None,
        verify_checksums: bool = True,
    ) -> None:
        self.rid = rid
        self.xid = xid
        self.state = RequestState.EXPECT_REQ if expect_req else RequestState.OPEN
        self.initial_credit = initial_credit
        self.batch = max(1, initial_credit // 2)
        self.credit_dir = credit_dir or (
            CreditDirection.REQUEST if expect_req else CreditDirection.RESPONSE
        )
        self.verify_checksums = verify_checksums
        self._streams: dict[str, _Stream] = {}
        self._outgoing: list[Frame] = []

    # -- queries ---------------------------------------------------------------------------

    def stream_state(self, stream_id: str) -> StreamState:
        s = self._streams.get(stream_id)
        return s.state if s is not None else StreamState.NEW

    @property
    def open_streams(self) -> list[str]:
        return [s.stream_id for s in self._streams.values() if s.state in (_S.OPEN, _S.IN_ITEM)]

    @property
    def finished(self) -> bool:
        return self.state in (RequestState.DONE, RequestState.FAILED)

    def data_to_send(self) -> list[Frame]:
        """CREDIT frames queued since the last call (and clears the queue)."""
        out, self._outgoing = self._outgoing, []
        return out

    @property
    def has_data_to_send(self) -> bool:
        """Whether :meth:`data_to_send` would return frames (a check that allocates nothing)."""
        return bool(self._outgoing)

    # -- input -----------------------------------------------------------------------------

    def receive(self, frame: Frame) -> list[Event]:
        """Process one frame of this request and return what it means.

        :raises ProtocolError: the frame is not allowed here (the receiver is then FAILED).
        """
        if _c_receive is not None:
            # The compiled fast path takes the common valid frames (the same transitions
            # and events); anything else, and every mistake, is decided below.
            events: list[Event] | None = _c_receive(self, frame)
            if events is not None:
                return events
        return self._receive(frame)

    def _receive(self, frame: Frame) -> list[Event]:
        inp = _INPUTS.get(frame.frame_type)
        if inp is None:
            raise self._fail(
                StreamStateError(f"{frame.frame_type.name} is not part of a request body")
            )
        if frame.id.value != self.rid.value:  # MessageId equality, without attrs' __ne__
            raise self._fail(
                StreamStateError(f"frame for request {frame.id} reached request {self.rid}")
            )
        nxt = REQUEST_TRANSITIONS.get((self.state, inp))
        if nxt is None:
            raise self._fail(StreamStateError(self._request_mistake(inp)))
        try:
            events = self._apply(frame, inp)
        except ProtocolError as exc:
            raise self._fail(exc) from None
        self.state = nxt
        return events

    def _request_mistake(self, inp: RequestInput) -> str:
        if self.state is RequestState.EXPECT_REQ:
            return f"{inp.value} before REQ"
        if self.state in (RequestState.DONE, RequestState.FAILED):
            return f"{inp.value} after the request ended"
        if inp is RequestInput.REQ:
            return "second REQ for the same request id"
        return f"{inp.value} not allowed in state {self.state.value}"

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self.state = RequestState.FAILED
        return exc

    def _step(self, stream: _Stream, inp: RequestInput) -> None:
        nxt = STREAM_TRANSITIONS.get((stream.state, inp))
        if nxt is None:
            why = _STREAM_MISTAKES.get(
                (stream.state, inp), f"{inp.value} in stream state {stream.state.value}"
            )
            raise StreamStateError(f"{why}: stream {stream.stream_id!r}")
        stream.state = nxt

    def _apply(self, frame: Frame, inp: RequestInput) -> list[Event]:
        if inp is RequestInput.CHUNK:
            return self._chunk(frame)
        if inp is RequestInput.LOG:
            meta = frame.meta or {}
            if meta.get("level") == "progress":
                return [
                    ProgressReceived(
                        progress=float(meta.get("progress", 0.0)),
                        message=meta.get("message") or "",
                        indeterminate=meta.get("indeterminate") is True,
                    )
                ]
            level = meta.get("level", "")
            return [
                LogReceived(
                    level=level,
                    message=meta.get("message") or "",
                    attribution_class=meta.get("attribution_class"),
                    arg_urn=meta.get("arg_urn"),
                    data=meta.get(level) if level in _TELEMETRY_LEVELS else None,
                )
            ]
        if inp is RequestInput.STREAM_START:
            sid = frame.stream_id or ""
            stream = self._streams.get(sid)
            if stream is None:
                stream = _Stream(
                    sid, self.initial_credit, bool(frame.is_sequence), bool(frame.unbounded)
                )
                self._streams[sid] = stream
            self._step(stream, inp)
            return [
                StreamOpened(
                    stream_id=sid,
                    media_urn=frame.media_urn or "",
                    is_sequence=stream.is_sequence,
                    unbounded=stream.unbounded,
                    output=frame.output,
                    meta=frame.meta,
                )
            ]
        if inp is RequestInput.STREAM_END:
            stream = self._stream_for(frame)
            self._step(stream, inp)
            if frame.chunk_count is not None and frame.chunk_count != stream.chunks:
                raise StreamStateError(
                    f"chunk count wrong: STREAM_END of {stream.stream_id!r} says {frame.chunk_count}, "
                    f"{stream.chunks} chunks arrived"
                )
            if frame.chunk_count is None and not stream.unbounded and self._strict_count:
                raise StreamStateError(
                    f"STREAM_END of bounded stream {stream.stream_id!r} lacks chunk_count"
                )
            return [StreamClosed(stream_id=stream.stream_id, chunk_count=frame.chunk_count)]
        if inp is RequestInput.END:
            still_open = self.open_streams
            if still_open:
                raise StreamStateError(
                    f"END while stream(s) still open: {', '.join(map(repr, still_open))}"
                )
            return [BodyEnded(meta=frame.meta)]
        if inp is RequestInput.ERR:
            return [ErrorReport.from_meta(frame.meta)]
        # REQ
        return [
            RequestOpened(rid=frame.id, xid=frame.routing_id, cap=frame.cap, payload=frame.payload)
        ]

    #: STREAM_END of a bounded stream must carry chunk_count. The reference always writes it.
    _strict_count = False

    def _stream_for(self, frame: Frame) -> _Stream:
        sid = frame.stream_id or ""
        stream = self._streams.get(sid)
        if stream is None:
            stream = _Stream(sid, self.initial_credit, False, False)
            self._step(
                stream,
                RequestInput.CHUNK
                if frame.frame_type is FrameType.CHUNK
                else RequestInput.STREAM_END,
            )
        return stream

    def _chunk(self, frame: Frame) -> list[Event]:
        stream = self._stream_for(frame)
        self._step(stream, RequestInput.CHUNK)
        if frame.chunk_index != stream.chunks:
            raise StreamStateError(
                f"chunk out of place: stream {stream.stream_id!r} expected chunk_index {stream.chunks}, "
                f"got {frame.chunk_index}"
            )
        if stream.window <= 0:
            raise CreditViolationError(
                f"CREDIT_VIOLATION: chunk received beyond the granted window on stream {stream.stream_id}"
            )
        stream.window -= 1
        stream.chunks += 1
        payload = frame.payload or b""
        if self.verify_checksums and frame.checksum != checksum(payload):
            raise ChecksumMismatchError(
                f"Checksum mismatch on stream {stream.stream_id!r} chunk {frame.chunk_index}: "
                f"expected {frame.checksum}, computed {checksum(payload)}"
            )
        if not payload:
            # An empty CHUNK carries nothing; it still spent a credit, so give it back.
            self._grant(stream, 1)
            return []
        sid = stream.stream_id
        if stream.assembler is None:
            held = frame.checksum
            wire = (held, len(payload)) if self.verify_checksums and held is not None else None
            return [StreamData(stream_id=sid, value=decode_scalar(payload), wire=wire)]
        continuing = stream.assembler.in_item
        if not continuing:
            stream.item_meta = frame.meta
        items = stream.assembler.feed(payload)
        self._step(
            stream,
            RequestInput.ITEM_INCOMPLETE
            if stream.assembler.in_item
            else RequestInput.ITEM_COMPLETE,
        )
        if continuing or not items:
            # Continuation fragments (and an item's unfinished first fragment) do not wait
            # for the consumer: grant the credit back at once, as the reference does.
            self._grant(stream, 1)
            if not items:
                return []
        meta: Any = stream.item_meta
        stream.item_meta = None
        return [
            StreamItem(stream_id=sid, value=v, meta=meta if i == 0 else None)
            for i, v in enumerate(items)
        ]

    # -- credit ----------------------------------------------------------------------------

    def _grant(self, stream: _Stream, n: int) -> None:
        stream.window += n
        self._outgoing.append(
            build.credit(self.rid, n, self.credit_dir, stream_id=stream.stream_id, xid=self.xid)
        )

    def consumed(self, stream_id: str, n: int = 1) -> None:
        """The consumer has taken ``n`` chunk events of ``stream_id``; batch a grant if due."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.state is StreamState.CLOSED or self.finished:
            return
        stream.pending += n
        if stream.pending >= self.batch:
            grant = stream.pending - stream.pending % self.batch
            stream.pending -= grant
            self._grant(stream, grant)

    def flush_credit(self, stream_id: str | None = None) -> None:
        """Grant every pending credit now (call before blocking on an empty input)."""
        if self.finished:
            return
        for stream in self._streams.values():
            if (
                (stream_id is None or stream.stream_id == stream_id)
                and stream.pending
                and stream.state is not StreamState.CLOSED
            ):
                n, stream.pending = stream.pending, 0
                self._grant(stream, n)


#: The compiled fast path of :meth:`BodyReceiver.receive` (``_speedups.receive_fast``), or
#: ``None``: not built, switched off (``CARTRIDGE_RUNTIME_PURE_PYTHON``), or refused by its
#: checks of the tables and event classes below.
_c_receive: Any = None
#: ``_speedups.serve_flow_fast`` (the cartridge connection's flow frames), or ``None`` with
#: :data:`_c_receive`.
_c_serve_flow: Any = None


def _load_receiver_speedups() -> bool:
    """Hand the compiled receiver its tables; False when it is absent or switched off."""
    global _c_receive, _c_serve_flow
    if os.environ.get(PURE_PYTHON_ENV):
        return False
    try:
        from ._speedups import configure_receiver, receive_fast, serve_flow_fast
    except ImportError:
        return False
    # The C code applies these transitions only; check they are still the tables' own.
    expected = {
        (_R.EXPECT_REQ, _I.REQ): _R.OPEN,
        (_R.OPEN, _I.STREAM_START): _R.OPEN,
        (_R.OPEN, _I.CHUNK): _R.OPEN,
        (_R.OPEN, _I.STREAM_END): _R.OPEN,
        (_R.OPEN, _I.END): _R.DONE,
    }
    stream_steps = {
        (_S.NEW, _I.STREAM_START): _S.OPEN,
        (_S.OPEN, _I.CHUNK): _S.OPEN,
        (_S.OPEN, _I.STREAM_END): _S.CLOSED,
    }
    if any(REQUEST_TRANSITIONS.get(k) is not v for k, v in expected.items()) or any(
        STREAM_TRANSITIONS.get(k) is not v for k, v in stream_steps.items()
    ):
        return False
    events = (RequestOpened, StreamOpened, StreamData, StreamClosed, BodyEnded)
    try:
        configure_receiver(
            inputs=(
                FrameType.REQ,
                FrameType.STREAM_START,
                FrameType.CHUNK,
                FrameType.STREAM_END,
                FrameType.END,
            ),
            request_states=(_R.EXPECT_REQ, _R.OPEN, _R.DONE),
            stream_states=(_S.OPEN, _S.CLOSED),
            stream_class=_Stream,
            decode_scalar=decode_scalar,
            events=events,
            event_fields=tuple(tuple(f.name for f in attrs.fields(e)) for e in events),
        )
    except (TypeError, ValueError):
        return False
    _c_receive = receive_fast
    _c_serve_flow = serve_flow_fast
    return True


_load_receiver_speedups()
