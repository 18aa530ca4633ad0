"""The handler's outputs: one :class:`OutputStream` per declared output of the cap.

An :class:`OutputStream` validates what the handler does and hands the work to a *backend*:
the wire backend (:mod:`._session`) turns it into frames through an
:class:`~cartridge_runtime.protocol.OutgoingStream` and waits for credit; the local backend
(:mod:`._local`, CLI mode) hands each emission to a sink. Progress and logs go through the
request's :class:`Reporter` and never wait for credit.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

import anyio
import attrs

from cartridge_runtime.protocol import AttributionClass

from ._errors import OutputError
from ._reports import Reporter as Reporter
from ._reports import report_final, report_log, report_progress


@attrs.frozen(kw_only=True)
class OutputSpec:
    """What the runtime knows about one output of a request."""

    media_urn: str  #: the media URN its STREAM_START carries (key 12)
    declared_urn: str  #: the output's media URN as the definition writes it
    name: str = "output"
    is_main: bool = True
    required: bool = True  #: a required output never written becomes an empty stream
    is_sequence: bool = False  #: the declared cardinality (used for an empty stream)
    void: bool = False  #: the main output of a ``media:void`` cap: never opened
    index: int = 0  #: position in the response (stream id suffix)


class OutputBackend(Protocol):
    """The transport of one output (frames on the wire, or a local sink).

    ``write``, ``start_write`` and ``close`` may do their work in the call and return
    ``None``, or return an awaitable the caller awaits (a coroutine method does the latter):
    the wire backend thus sends a small response with no coroutine per step.
    """

    async def start(
        self, is_sequence: bool, unbounded: bool, meta: Mapping[str, Any] | None
    ) -> None: ...
    def write(self, data: bytes | memoryview) -> Awaitable[None] | None: ...
    def start_write(self, data: bytes | memoryview) -> Awaitable[None] | None:
        """``start(False, False, None)`` then ``write(data)``: the first write of a stream."""

    async def emit_value(self, value: Any) -> None: ...
    async def emit_item(self, value: Any, meta: Mapping[str, Any] | None) -> None: ...
    async def flush(self) -> None: ...
    def close(self) -> Awaitable[None] | None: ...


class _Gate:
    """The mutual exclusion of one output's emissions (tasks of one handler may share it).

    Cheaper than :class:`anyio.Lock` where it matters, the uncontended case: entering is a
    flag test, with no event-loop call. A contended entry waits on an event, and the gate
    passes straight to the next waiter (FIFO) on exit. A waiter cancelled after being handed
    the gate hands it on, so cancellation never leaves it held.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: collections.deque[anyio.Event] | None = None

    async def __aenter__(self) -> None:
        if not self._held:
            self._held = True
            return
        if self._waiters is None:
            self._waiters = collections.deque()
        turn = anyio.Event()
        self._waiters.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self._release()  # handed over as we were cancelled: pass it on
            else:
                self._waiters.remove(turn)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        waiters = self._waiters
        if waiters:
            waiters.popleft().set()  # stays held: it is the next waiter's now
        else:
            self._held = False


class OutputStream:
    """One output of the response.

    The stream opens (STREAM_START) at its first emission or at an explicit :meth:`start`,
    which may also set the mode and stream meta. :meth:`write` sends bytes (always CBOR-wrapped,
    chunked at the negotiated chunk size, small writes coalesced); :meth:`emit_cbor` one value;
    :meth:`emit_list_item` one sequence item. Data waits for the receiver's credit.
    """

    def __init__(self, spec: OutputSpec, backend: OutputBackend, reporter: Reporter) -> None:
        self.spec = spec
        self._backend = backend
        self._reporter = reporter
        self._lock = _Gate()
        self.started = False
        self.closed = False
        self.is_sequence = spec.is_sequence
        self.unbounded = False

    def __repr__(self) -> str:
        return (
            f"OutputStream(media_urn={self.spec.media_urn!r}, main={self.spec.is_main}, "
            f"started={self.started})"
        )

    @property
    def media_urn(self) -> str:
        return self.spec.media_urn

    def _check_open(self) -> None:
        if self.closed:
            raise OutputError(f"output {self.spec.declared_urn} is already closed")
        if self.spec.void:
            raise OutputError("this cap's output is media:void; it has no data stream")

    async def _start(
        self, is_sequence: bool, unbounded: bool, meta: Mapping[str, Any] | None
    ) -> None:
        self.started = True
        self.is_sequence = is_sequence
        self.unbounded = unbounded
        await self._backend.start(is_sequence, unbounded, meta)

    async def start(self, is_sequence: bool = False, meta: Mapping[str, Any] | None = None) -> None:
        """Open the stream now, in scalar or sequence mode, with optional stream meta.

        :raises OutputError: already started or closed.
        """
        async with self._lock:
            self._check_open()
            if self.started:
                raise OutputError(f"output {self.spec.declared_urn} was already started")
            await self._start(is_sequence, False, meta)

    async def start_unbounded(
        self, is_sequence: bool = False, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Open the stream as *unbounded* (STREAM_START key 20; STREAM_END without a count).

        :raises OutputError: already started or closed.
        """
        async with self._lock:
            self._check_open()
            if self.started:
                raise OutputError(f"output {self.spec.declared_urn} was already started")
            await self._start(is_sequence, True, meta)

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send bytes (a scalar stream's data, or one item on a sequence stream)."""
        gate = self._lock
        if gate._held:  # taken: wait for it (free, it is taken with a plain test below)
            async with gate:
                await self._write(data)
            return
        gate._held = True
        try:
            # _write inlined: the uncontended write of a small response, one coroutine less.
            if self.closed or self.spec.void:
                self._check_open()
            if not isinstance(data, bytes):
                data = memoryview(data)
            if self.started:
                pending = self._backend.write(data)
            else:
                self.started = True
                self.is_sequence = False
                pending = self._backend.start_write(data)
            if pending is not None:
                await pending
        finally:
            if gate._waiters:
                gate._release()  # hand it to the next waiter
            else:
                gate._held = False

    async def _write(self, data: bytes | bytearray | memoryview) -> None:
        self._check_open()
        if not self.started:
            await self._start(False, False, None)
        pending = self._backend.write(data if isinstance(data, bytes) else memoryview(data))
        if pending is not None:
            await pending

    async def emit_text(self, text: str, meta: Mapping[str, Any] | None = None) -> None:
        """Send text the Bifaci way: its UTF-8 bytes as CBOR byte strings (the convention for
        text on the wire; a receiver joins them and decodes once), never CBOR text. On a
        sequence output (declared ``is_sequence``, already started as one, or given ``meta``)
        the text is one item, with its meta.

        :raises TypeError: ``text`` is not a ``str``.
        :raises OutputError: ``meta`` given on a stream started in scalar mode.
        """
        if not isinstance(text, str):
            raise TypeError(f"emit_text takes a str, not {type(text).__name__}")
        data = text.encode("utf-8")
        if meta is not None or self.is_sequence:
            await self.emit_list_item(data, meta)
        else:
            # One emission: on the wire the same bytes as ``write``; in CLI mode one line.
            await self.emit_cbor(data)

    async def emit_cbor(self, value: Any) -> None:
        """Send one value (text is split on character boundaries, lists per element, maps per entry)."""
        async with self._lock:
            self._check_open()
            if not self.started:
                await self._start(False, False, None)
            await self._backend.emit_value(value)

    async def emit_list_item(self, value: Any, meta: Mapping[str, Any] | None = None) -> None:
        """Send one sequence item, with optional per-item meta. Opens the stream in sequence mode.

        :raises OutputError: the stream was started in scalar mode.
        """
        async with self._lock:
            self._check_open()
            if not self.started:
                await self._start(True, False, None)
            if not self.is_sequence:
                raise OutputError(
                    f"output {self.spec.declared_urn} is a scalar stream; emit_list_item needs a sequence"
                )
            await self._backend.emit_item(value, meta)

    async def flush(self) -> None:
        """Send coalesced bytes now."""
        async with self._lock:
            if self.started and not self.closed:
                await self._backend.flush()

    async def close(self) -> None:
        """Flush and end the stream (STREAM_END). A stream never started is opened empty first."""
        gate = self._lock
        if gate._held:  # taken: wait for it (free, it is taken with a plain test below)
            async with gate:
                await self._close()
            return
        gate._held = True
        try:
            # _close inlined: one coroutine less for the runtime's close of every output.
            if self.closed or self.spec.void:
                return
            if not self.started:
                await self._start(self.spec.is_sequence, False, None)
            self.closed = True
            if (pending := self._backend.close()) is not None:
                await pending
        finally:
            if gate._waiters:
                gate._release()  # hand it to the next waiter
            else:
                gate._held = False

    async def _close(self) -> None:
        if self.closed or self.spec.void:
            return
        if not self.started:
            await self._start(self.spec.is_sequence, False, None)
        self.closed = True
        if (pending := self._backend.close()) is not None:
            await pending

    async def progress(self, fraction: float | None, message: str = "") -> None:
        """Report progress (0..1); ``None`` means indeterminate. Never waits for credit."""
        await report_progress(self._reporter, fraction, message)

    async def log(
        self,
        level: str,
        message: str,
        attribution_class: str = AttributionClass.INTERNAL,
        arg_urn: str | None = None,
    ) -> None:
        """Send a LOG (``level`` e.g. ``info``/``warn``). Never waits for credit.

        :raises OutputError: ``level`` is ``progress`` (use :meth:`progress`).
        """
        await report_log(self._reporter, level, message, attribution_class, arg_urn)

    def finish(self, progress: float = 1.0, message: str | None = None) -> None:
        """Set the progress and message the final END carries."""
        report_final(self._reporter, progress, message)


def must_finish(output: OutputStream) -> bool:
    """Whether the runtime ends ``output`` (``await output.close()``) after a successful
    ``perform`` (REQ-25): open, or never started and required (an empty stream)."""
    if output.closed or output.spec.void:
        return False
    return output.started or output.spec.required


async def finish_output(output: OutputStream) -> None:
    """End ``output`` after a successful ``perform`` (REQ-25): the runtime's step, not the
    handler's, so not a method of the handler-facing stream."""
    if must_finish(output):
        await output.close()
