"""One argument stream of a request's input as the handler sees it: :class:`InputStream`, and
:class:`StreamFeed`, its feeding side (the package of them is :mod:`._input_package`'s).

Theory of operation: the session (or the CLI, or a test) *pushes* decoded events into small
mailboxes without ever blocking (credit bounds how much can pile up), through the feeding sides
:class:`StreamFeed` and :class:`~._input_package.PackageFeed`; the handler *pulls*. Each
time the handler takes a data event, the owner's ``consumed`` hook returns credit (a plain
call that returns an awaitable only when it has frames to wait for) (batched by
:class:`~cartridge_runtime.protocol.BodyReceiver`), and before the handler blocks on an empty
mailbox the ``before_block`` hook flushes pending credit, so a sender is never starved.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
import attrs
import cbor2

from cartridge_runtime._redact import describe, describe_meta
from cartridge_runtime.protocol import AttributionClass, ErrorCode

from ._errors import InputDecodeError, InputStreamError

_DATA, _ITEM, _END, _ERR = 0, 1, 2, 3


async def _noop(*_: Any) -> None:
    return None


class _Mailbox:
    """A non-blocking put / awaiting get queue (works on asyncio and trio)."""

    __slots__ = ("_event", "_q")

    def __init__(self) -> None:
        self._q: collections.deque[Any] = collections.deque()
        self._event: anyio.Event | None = None

    def put(self, entry: Any) -> None:
        self._q.append(entry)
        if self._event is not None:
            self._event.set()
            self._event = None

    def __len__(self) -> int:
        return len(self._q)

    def take_nowait(self) -> Any:
        return self._q.popleft()

    def peek(self) -> Any:
        return self._q[0]

    async def wait(self) -> None:
        if not self._q:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


def _as_bytes(value: Any) -> bytes:
    """The byte-collector rule: bstr and tstr contents join; anything else is re-encoded as CBOR."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return cbor2.dumps(value)


@attrs.frozen(kw_only=True)
class InputItem:
    """One decoded value of an input stream, with the per-item meta of sequence items."""

    value: Any = attrs.field(repr=describe)
    meta: Any = attrs.field(default=None, repr=describe_meta)


class InputStream:
    """One incoming argument stream.

    Read it exactly one way: iterate decoded values (:meth:`values`) or items with meta
    (:meth:`items`), bytes (``async for chunk in stream`` / :meth:`read`), or collect it whole
    (:meth:`collect_bytes`, :meth:`collect_value`; refused on unbounded streams).
    """

    def __init__(
        self,
        stream_id: str,
        media_urn: str,
        *,
        is_sequence: bool = False,
        unbounded: bool = False,
        meta: Any = None,
        consumed: Callable[[str], Awaitable[None] | None] = _noop,
        before_block: Callable[[str], Awaitable[None]] = _noop,
        wire_slot: list[Any] | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.media_urn = media_urn
        self.is_sequence = is_sequence
        self.is_unbounded = unbounded
        self.meta = meta
        self._box = _Mailbox()
        self._consumed = consumed
        self._before_block = before_block
        self._done = False
        self._pending = b""  # bytes left over from read(n)
        #: Shared with the request's outputs: the last value taken that arrived as one whole
        #: verified CHUNK, as ``(value, payload, checksum)`` (see ``WireOutput.write``).
        self._wire_slot = wire_slot

    @property
    def size(self) -> int | None:
        """The input's size in bytes when the sender knew it (a file: stream meta ``size``),
        else ``None``; for progress as a fraction of the whole."""
        meta = self.meta
        size = meta.get("size") if isinstance(meta, Mapping) else None
        return size if type(size) is int and size >= 0 else None

    def __repr__(self) -> str:
        return (
            f"InputStream(media_urn={self.media_urn!r}, stream_id={self.stream_id!r}, "
            f"is_sequence={self.is_sequence}, unbounded={self.is_unbounded})"
        )

    # -- reading ---------------------------------------------------------------------------

    async def next_item(self) -> InputItem | None:
        """The next decoded value (with item meta), or ``None`` at the end of the stream.

        :raises InputStreamError: the stream broke (checksum, credit, decoding, abandoned).
        """
        if self._done:
            return None
        box = self._box
        if not len(box):
            await self._before_block(self.stream_id)
            await box.wait()
        kind, value, meta, credit = box.take_nowait()
        if kind == _END:
            self._done = True
            return None
        if kind == _ERR:
            box.put((_ERR, value, None, 0))  # stay broken for later reads
            raise _stream_error(value)
        if kind == _DATA:
            if meta is not None and self._wire_slot is not None:
                self._wire_slot[0] = (value, meta[0], meta[1])
            meta = None
        if credit and (pending := self._consumed(self.stream_id)) is not None:
            await pending
        return InputItem(value=value, meta=meta)

    async def items(self) -> AsyncIterator[InputItem]:
        """Every value with its item meta (meta is ``None`` in scalar mode)."""
        while (item := await self.next_item()) is not None:
            yield item

    async def values(self) -> AsyncIterator[Any]:
        """Every decoded value: one per chunk in scalar mode, one per item in sequence mode."""
        while (item := await self.next_item()) is not None:
            yield item.value

    async def chunks(self) -> AsyncIterator[bytes]:
        """The stream as bytes pieces (bstr/tstr contents; other values CBOR-encoded)."""
        if self._pending:
            data, self._pending = self._pending, b""
            yield data
        while (item := await self.next_item()) is not None:
            data = _as_bytes(item.value)
            if data:
                yield data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks()

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all remaining when ``n < 0``); ``b""`` at the end."""
        if n < 0:
            return await self._collect(check_unbounded=False)
        while not self._pending:
            item = await self.next_item()
            if item is None:
                return b""
            self._pending = _as_bytes(item.value)
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    def _refuse_unbounded(self, what: str) -> None:
        if self.is_unbounded:
            raise InputDecodeError(
                f"{what} refuses unbounded stream {self.stream_id!r} ({self.media_urn}); "
                "read it incrementally"
            )

    async def _collect(self, *, check_unbounded: bool = True) -> bytes:
        if check_unbounded:
            self._refuse_unbounded("collect_bytes")
        parts = [self._pending] if self._pending else []
        self._pending = b""
        queued = self._box._q  # read in place: the mailbox is this module's own
        while not self._done:
            if queued and (kind := queued[0][0]) != _ERR and kind != _ITEM:
                # What next_item does for a value or the end already here, inlined: the
                # common small input (its one CHUNK and its end queued) costs no coroutine.
                _, value, wire, credit = queued.popleft()
                if kind == _END:
                    self._done = True
                    break
                if wire is not None and self._wire_slot is not None:
                    self._wire_slot[0] = (value, wire[0], wire[1])
                if credit and (pending := self._consumed(self.stream_id)) is not None:
                    await pending
                parts.append(_as_bytes(value))
                continue
            item = await self.next_item()
            if item is None:
                break
            parts.append(_as_bytes(item.value))
        return b"".join(parts)

    async def collect_bytes(self) -> bytes:
        """The whole stream as bytes.

        :raises InputDecodeError: the stream is unbounded.
        :raises InputStreamError: the stream broke.
        """
        return await self._collect()

    async def collect_value(self) -> Any:
        """The whole stream as one value: a sequence stream gives the list of its items; a scalar
        stream gives its single value, or the joined bytes/text of several byte/text chunks, or
        the list of its values otherwise.

        :raises InputDecodeError: the stream is unbounded.
        """
        self._refuse_unbounded("collect_value")
        values = [v async for v in self.values()]
        if self.is_sequence:
            return values
        if len(values) == 1:
            return values[0]
        if values and all(isinstance(v, bytes) for v in values):
            return b"".join(values)
        if values and all(isinstance(v, str) for v in values):
            return "".join(values)
        return values if values else None

    async def collect_str(self) -> str:
        """The whole stream as UTF-8 text.

        :raises InputDecodeError: the bytes are not valid UTF-8 (or the stream is unbounded).
        """
        return _utf8(await self.collect_bytes(), self.media_urn)


def _utf8(data: bytes, urn: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputDecodeError(f"input {urn} is not valid UTF-8: {exc}", arg_urn=urn) from None


def _stream_error(exc: BaseException) -> BaseException:
    if isinstance(exc, InputStreamError):
        return exc
    code = getattr(exc, "code", ErrorCode.HANDLER_ERROR)
    cls = getattr(exc, "attribution_class", AttributionClass.INTERNAL)
    if str(code) == ErrorCode.CANCELLED:
        cls = AttributionClass.INTERNAL
    err = InputStreamError(str(exc), code=str(code), attribution_class=str(cls))
    err.__cause__ = exc
    return err


# -- the feeding side ------------------------------------------------------------------------------


class StreamFeed:
    """The feeding side of one :class:`InputStream`: what the session, the CLI or a test pushes
    into it. None of these calls blocks; the handler pulls what they queue.

    :ivar stream: the stream fed, as the handler reads it.
    """

    __slots__ = ("_box", "stream")

    def __init__(self, stream: InputStream) -> None:
        self.stream = stream
        self._box = stream._box

    def __repr__(self) -> str:
        return f"StreamFeed({self.stream!r})"

    def push_data(self, value: Any, wire: tuple[bytes, int] | None = None) -> None:
        """Queue one decoded value; ``wire`` is the verified (payload, checksum) of the CHUNK
        that carried it when the value is that CHUNK's whole byte string."""
        self._box.put((_DATA, value, wire, 1))

    def push_item(self, value: Any, meta: Any, credit: int) -> None:
        """Queue one sequence item; ``credit`` is what taking it returns to the sender."""
        self._box.put((_ITEM, value, meta, credit))

    def push_end(self) -> None:
        """The stream ended: reads return what is queued, then the end."""
        self._box.put((_END, None, None, 0))

    def push_error(self, exc: BaseException) -> None:
        """The stream broke with ``exc``: reads raise it (as :class:`InputStreamError`) once
        they reach it, and every later read does too."""
        self._box.put((_ERR, exc, None, 0))

    def break_unread(self, exc: BaseException) -> None:
        """The request's input broke with ``exc``: unless the stream was read to its end, its
        reads raise it, as after :meth:`push_error`."""
        if not self.stream._done:
            self._box.put((_ERR, exc, None, 0))

    def detach(self) -> None:
        """Drop the stream's credit hooks: the request is over, and they point back at it."""
        stream = self.stream
        stream._consumed = stream._before_block = _noop
