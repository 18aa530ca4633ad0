"""Peer invocation: a handler calls another cap through the host.

``call = req.peer().call(cap)``; ``arg = await call.arg(media_urn)`` gives an
:class:`~cartridge_runtime.runtime.OutputStream` writing one argument stream (credited like
any stream); ``response = await call.finish()`` ends the request body and returns a
:class:`PeerResponse` that yields :class:`PeerData` and :class:`PeerLog` as they arrive,
forwards the peer's progress into a sub-range of the caller's progress, and raises
:class:`PeerCallError` (keeping the peer's code, class and arg_urn) when the peer answers ERR.
The frames are made by a transport (:mod:`._session` on the wire).

``timeout=`` (on :meth:`PeerInvoker.call` and :meth:`PeerInvoker.call_with_bytes`) bounds the
whole peer call from its creation: a wait for the response that runs past it cancels the call
(CANCEL to the host) and raises :class:`PeerCallError` with code ``TIMEOUT``, class
``resource``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import anyio
import attrs

from cartridge_runtime._redact import describe, describe_meta
from cartridge_runtime.protocol import (
    AttributionClass,
    BodyEnded,
    ErrorCode,
    ErrorReport,
    Event,
    LogReceived,
    MessageId,
    ProgressReceived,
    ProtocolError,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
)

from ._errors import PeerCallError
from ._input import _as_bytes, _Mailbox
from ._output import OutputStream, Reporter


@attrs.frozen(kw_only=True)
class PeerData:
    """One value from the peer's response (a scalar chunk or a sequence item)."""

    value: Any = attrs.field(repr=describe)
    meta: Any = attrs.field(default=None, repr=describe_meta)
    media_urn: str = ""  #: the media URN of the stream it came on
    output: str | None = None  #: key 21 of that stream (``None`` for the main output)


@attrs.frozen(kw_only=True)
class PeerLog:
    """A LOG frame from the peer (not progress, which is forwarded)."""

    level: str
    message: str
    attribution_class: str | None = None
    arg_urn: str | None = None


class PeerTransport(Protocol):
    """What a peer call needs from the runtime mode that carries it."""

    def arg_stream(self, call: PeerCall, media_urn: str, index: int) -> OutputStream: ...
    async def send_req(self, call: PeerCall) -> None: ...
    async def send_end(self, call: PeerCall) -> None: ...
    async def cancel(self, call: PeerCall) -> None: ...


class PeerResponse:
    """The response to a peer call, read as it arrives."""

    def __init__(self, call: PeerCall) -> None:
        self._call = call
        self._box = _Mailbox()
        self._streams: dict[str, tuple[str, str | None]] = {}
        self.end_meta: Any = None
        self.done = False
        self.consumed: Any = None  # hook(stream_id) -> None, set by the transport
        self.before_block: Any = None  # hook() -> None

    def _deliver(self, event: Event | ProtocolError, credit: int = 0) -> None:
        self._box.put((event, credit))

    async def _next(self) -> tuple[Any, int]:
        if not len(self._box):
            if self.before_block is not None:
                await self.before_block()
            deadline = self._call.deadline
            if deadline is None:
                await self._box.wait()
            else:
                with anyio.CancelScope(deadline=deadline):
                    await self._box.wait()
                if not len(self._box):
                    await self._expire()
        return self._box.take_nowait()  # type: ignore[no-any-return]

    async def _expire(self) -> None:
        """The call's timeout ran out: cancel it on the wire and fail.

        :raises PeerCallError: always (code ``TIMEOUT``, class ``resource``).
        """
        self.done = True
        await self._call.cancel()
        raise PeerCallError(
            f"peer call {self._call.cap_urn} did not finish within its timeout of "
            f"{self._call.timeout:g} s",
            code=ErrorCode.TIMEOUT,
            attribution_class=AttributionClass.RESOURCE,
        )

    async def __aiter__(self) -> AsyncIterator[PeerData | PeerLog]:
        reporter = self._call._reporter
        lo, hi = self._call.progress_range
        while not self.done:
            event, credit = await self._next()
            if credit and self.consumed is not None:
                await self.consumed(getattr(event, "stream_id", ""))
            if isinstance(event, StreamOpened):
                self._streams[event.stream_id] = (event.media_urn, event.output)
            elif isinstance(event, (StreamData, StreamItem)):
                urn, output = self._streams.get(event.stream_id, ("", None))
                yield PeerData(
                    value=event.value,
                    meta=getattr(event, "meta", None),
                    media_urn=urn,
                    output=output,
                )
            elif isinstance(event, StreamClosed):
                continue
            elif isinstance(event, LogReceived):
                yield PeerLog(
                    level=event.level,
                    message=event.message,
                    attribution_class=event.attribution_class,
                    arg_urn=event.arg_urn,
                )
            elif isinstance(event, ProgressReceived):
                if reporter is not None:
                    await reporter.progress(
                        None
                        if event.indeterminate
                        else lo + (hi - lo) * max(0.0, min(1.0, event.progress)),
                        event.message,
                    )
            elif isinstance(event, BodyEnded):
                self.end_meta = event.meta
                self.done = True
            elif isinstance(event, ErrorReport):
                self.done = True
                raise PeerCallError(
                    event.message,
                    code=event.code,
                    attribution_class=event.attribution_class,
                    arg_urn=event.arg_urn,
                )
            elif isinstance(event, BaseException):
                self.done = True
                if isinstance(event, PeerCallError):
                    raise event
                raise PeerCallError(f"peer call {self._call.cap_urn} failed: {event}") from event

    async def _main_values(self) -> list[Any]:
        reporter = self._call._reporter
        values = []
        async for ev in self:
            if isinstance(ev, PeerLog):
                if reporter is not None:
                    await reporter.log(
                        ev.level,
                        ev.message,
                        ev.attribution_class or AttributionClass.INTERNAL,
                        ev.arg_urn,
                    )
            elif ev.output is None:
                values.append(ev.value)
        return values

    async def collect_bytes(self) -> bytes:
        """The main output's bytes (logs are forwarded to the caller's request).

        :raises PeerCallError: the peer answered ERR.
        """
        return b"".join(_as_bytes(v) for v in await self._main_values())

    async def collect_value(self) -> Any:
        """The main output as one value (single value, joined bytes/text, or a list)."""
        values = await self._main_values()
        if len(values) == 1:
            return values[0]
        if values and all(isinstance(v, bytes) for v in values):
            return b"".join(values)
        if values and all(isinstance(v, str) for v in values):
            return "".join(values)
        return values


class ResponseSink:
    """Where the connection routes a peer call's response (``protocol.PeerSink``): each event,
    or the error that broke the response, goes into the :class:`PeerResponse`'s mailbox;
    ``credit`` is 1 when consuming the event returns a credit."""

    __slots__ = ("_response",)

    def __init__(self, response: PeerResponse) -> None:
        self._response = response

    def deliver(self, event: Event | ProtocolError, credit: int = 0) -> None:
        self._response._deliver(event, credit)


class PeerCall:
    """One outgoing peer request being built."""

    def __init__(
        self,
        transport: PeerTransport,
        cap_urn: str,
        reporter: Reporter | None,
        timeout: float | None = None,
    ) -> None:
        self._transport = transport
        self.cap_urn = cap_urn
        self._reporter = reporter
        self.timeout = timeout
        #: When ``timeout`` runs out (``anyio.current_time()`` clock), if any.
        self.deadline = None if timeout is None else anyio.current_time() + timeout
        self._args: list[OutputStream] = []
        self._sent_req = False
        self._finished = False
        self.progress_range: tuple[float, float] = (0.0, 1.0)
        self.response = PeerResponse(self)
        self.rid: MessageId | None = None  # set by the transport

    def __repr__(self) -> str:
        return f"PeerCall(cap_urn={self.cap_urn!r}, args={len(self._args)})"

    def with_progress_range(self, lo: float, hi: float) -> PeerCall:
        """Map the peer's progress 0..1 onto ``lo..hi`` of the caller's progress."""
        self.progress_range = (float(lo), float(hi))
        return self

    async def _ensure_req(self) -> None:
        if not self._sent_req:
            self._sent_req = True
            await self._transport.send_req(self)

    async def arg(self, media_urn: str) -> OutputStream:
        """A writer for one argument stream typed ``media_urn``."""
        if self._finished:
            raise PeerCallError("peer call already finished; no more arguments")
        await self._ensure_req()
        for a in self._args:
            if not a.closed:
                await a.close()
        stream = self._transport.arg_stream(self, media_urn, len(self._args))
        self._args.append(stream)
        return stream

    async def finish(self) -> PeerResponse:
        """Close the arguments, send END, and return the response to read."""
        if not self._finished:
            await self._ensure_req()
            for a in self._args:
                await a.close()
            self._finished = True
            await self._transport.send_end(self)
        return self.response

    async def cancel(self) -> None:
        """Send CANCEL for this call (also done when the calling request is cancelled)."""
        await self._transport.cancel(self)


class PeerInvoker:
    """The handler's door to other caps (``req.peer()``)."""

    def __init__(self, transport: PeerTransport, reporter: Reporter | None) -> None:
        self._transport = transport
        self._reporter = reporter

    def call(self, cap_urn: str, *, timeout: float | None = None) -> PeerCall:
        """Start a call of ``cap_urn``; add arguments with :meth:`PeerCall.arg`.

        :param timeout: seconds for the whole call, from now (``None``: no limit); past it,
            reading the response cancels the call and raises :class:`PeerCallError`
            ``TIMEOUT``.
        """
        return PeerCall(self._transport, cap_urn, self._reporter, timeout)

    async def call_with_bytes(
        self,
        cap_urn: str,
        args: Sequence[tuple[str, bytes]],
        *,
        progress_range: tuple[float, float] = (0.0, 1.0),
        timeout: float | None = None,  # noqa: ASYNC109 (the call's own limit)
    ) -> PeerResponse:
        """Call ``cap_urn`` with whole byte arguments and return the response to read
        (``timeout`` as for :meth:`call`)."""
        call = self.call(cap_urn, timeout=timeout).with_progress_range(*progress_range)
        for urn, data in args:
            out = await call.arg(urn)
            await out.write(data)
        return await call.finish()
