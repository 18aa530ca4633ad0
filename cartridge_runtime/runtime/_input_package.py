"""The request's input as a whole: an :class:`InputPackage` of the argument streams as they
arrive, looked up by media URN or by argument name, and :class:`PackageFeed`, its feeding side.

The streams themselves, and the feeding side of one, are :mod:`._input`'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import attrs

from cartridge_runtime.urn import MediaUrn, UrnError, media_matches_for_stream

from ._errors import MissingInput, UnknownArgument
from ._input import InputStream, StreamFeed, _noop, _stream_error, _utf8


@attrs.frozen(kw_only=True)
class ArgStreams:
    """How the streams of one argument are recognised: the media URNs they may arrive under
    (the stdin source's, then the argument's own), as parsed values.

    :ivar name: the argument's name in the cap definition.
    :ivar media_urn: the argument's media URN (``arg_urn`` of its errors).
    """

    name: str
    media_urn: str
    urns: tuple[MediaUrn, ...]

    def matches(self, arrived: str) -> bool:
        """Whether a stream labelled ``arrived`` belongs to this argument (equivalence)."""
        return any(media_matches_for_stream(u, arrived) for u in self.urns)


def arg_table(definition: Any) -> dict[str, ArgStreams]:
    """Argument name -> :class:`ArgStreams` for a cap definition (``None``: empty)."""
    table: dict[str, ArgStreams] = {}
    for arg in getattr(definition, "args", ()):
        urns = []
        for text in dict.fromkeys((arg.stream_urn, arg.media_urn)):
            try:
                urns.append(MediaUrn.parse(text))
            except UrnError:
                continue
        table.setdefault(
            arg.name, ArgStreams(name=arg.name, media_urn=arg.media_urn, urns=tuple(urns))
        )
    return table


class InputPackage:
    """All input streams of one request, as they arrive.

    ``async for stream in package`` yields each :class:`InputStream` when its STREAM_START
    arrives (iterating again starts over). The collectors read every stream whole; the
    ``find_*`` / ``require_*`` lookups match media URNs by equivalence; :meth:`find`,
    :meth:`require` and :meth:`streams_of` look a stream up by the *argument name* of the
    cap's definition (the wire still carries only media URNs: the name is resolved through
    the definition to the URNs its streams arrive under).
    """

    def __init__(self, streams: list[InputStream] | None = None, *, complete: bool = False) -> None:
        self._streams: list[InputStream] = list(streams or [])
        self._ended = complete
        self._error: BaseException | None = None
        self._event: anyio.Event | None = None
        self._collected: list[tuple[str, bytes]] | None = None
        self._before_block: Callable[[], Awaitable[None]] = _noop
        self._cap_urn = ""
        self._definition: Any = None
        self._args: dict[str, ArgStreams] | None = None  # built on the first lookup by name

    def __repr__(self) -> str:
        return f"InputPackage(streams={[s.media_urn for s in self._streams]!r}, complete={self._ended})"

    # -- feeding ---------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        for s in self._streams:
            StreamFeed(s).break_unread(exc)
        self._wake()

    # -- reading ---------------------------------------------------------------------------

    async def _stream_at(self, index: int) -> InputStream | None:
        while index >= len(self._streams):
            if self._error is not None:
                raise _stream_error(self._error)
            if self._ended:
                return None
            await self._before_block()
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        return self._streams[index]

    def __aiter__(self) -> AsyncIterator[InputStream]:
        return _PackageIterator(self)

    async def streams(self) -> list[InputStream]:
        """Every stream, once the request body is complete."""
        return [s async for s in self]

    @property
    def arrived(self) -> list[str]:
        """Media URNs of the streams that have arrived so far."""
        return [s.media_urn for s in self._streams]

    async def collect_streams(self) -> list[tuple[str, bytes]]:
        """``(media_urn, bytes)`` per stream, in arrival order (each collected whole).

        :raises InputDecodeError: a stream is unbounded.
        :raises InputStreamError: a stream broke.
        """
        if self._collected is None:
            result = []
            async for s in self:
                result.append((s.media_urn, await s.collect_bytes()))
            self._collected = result
        return list(self._collected)

    async def collect_all_bytes(self) -> bytes:
        """Every stream's bytes, concatenated in arrival order."""
        return b"".join(data for _, data in await self.collect_streams())

    async def open_stream(self, media_urn: str) -> InputStream | None:
        """The first stream equivalent to ``media_urn`` (waiting for it), for incremental reading."""
        async for s in self:
            if media_matches_for_stream(media_urn, s.media_urn):
                return s
        return None

    async def find_stream(self, media_urn: str) -> bytes | None:
        """The bytes of the first stream equivalent to ``media_urn``, or ``None``."""
        for urn, data in await self.collect_streams():
            if media_matches_for_stream(media_urn, urn):
                return data
        return None

    async def find_stream_str(self, media_urn: str) -> str | None:
        """:meth:`find_stream` decoded as UTF-8.

        :raises InputDecodeError: not valid UTF-8.
        """
        data = await self.find_stream(media_urn)
        return None if data is None else _utf8(data, media_urn)

    async def require_stream(self, media_urn: str) -> bytes:
        """:meth:`find_stream`, but a missing stream is an error.

        :raises MissingInput: naming ``media_urn`` and the URNs that arrived.
        """
        data = await self.find_stream(media_urn)
        if data is None:
            raise MissingInput(media_urn, self.arrived)
        return data

    async def require_stream_str(self, media_urn: str) -> str:
        """:meth:`require_stream` decoded as UTF-8.

        :raises MissingInput: nothing equivalent arrived.
        :raises InputDecodeError: not valid UTF-8.
        """
        return _utf8(await self.require_stream(media_urn), media_urn)

    # -- lookups by argument name ------------------------------------------------------------

    def _arg(self, name: str) -> ArgStreams:
        args = self._args
        if args is None:
            args = self._args = arg_table(self._definition)
        found = args.get(name)
        if found is None:
            raise UnknownArgument(self._cap_urn, name, list(args))
        return found

    async def find(self, name: str, index: int = 0) -> InputStream | None:
        """The ``index``-th stream (arrival order) of argument ``name``, waiting for it; ``None``
        when the body ends with fewer. For reading incrementally or collecting it.

        :raises UnknownArgument: the cap's definition has no argument ``name``.
        :raises ValueError: ``index`` is negative.
        """
        if index < 0:
            raise ValueError("a stream index is 0 or more")
        arg = self._arg(name)
        seen = 0
        async for s in self:
            if arg.matches(s.media_urn):
                if seen == index:
                    return s
                seen += 1
        return None

    async def require(self, name: str, index: int = 0) -> InputStream:
        """:meth:`find`, but a missing stream is an error.

        :raises MissingInput: naming the argument (its name and media URN) and what arrived.
        :raises UnknownArgument: the cap's definition has no argument ``name``.
        """
        stream = await self.find(name, index)
        if stream is None:
            arg = self._arg(name)
            raise MissingInput(arg.media_urn, self.arrived, name=name, index=index)
        return stream

    async def streams_of(self, name: str) -> list[InputStream]:
        """Every stream of argument ``name`` (a repeated argument has several), once the
        body is complete.

        :raises UnknownArgument: the cap's definition has no argument ``name``.
        """
        arg = self._arg(name)
        return [s async for s in self if arg.matches(s.media_urn)]


class _PackageIterator:
    """``async for stream in package``: each stream as it arrives, from the first.

    A plain iterator object rather than an async generator: nothing to finalize when a caller
    stops after the first stream (the common "main input" case), so no ``aclose`` round trip
    through the event loop's async-generator hooks. ``aclose`` exists for code that wraps any
    async iterator in :func:`contextlib.aclosing`.
    """

    __slots__ = ("_index", "_package")

    def __init__(self, package: InputPackage) -> None:
        self._package: InputPackage | None = package
        self._index = 0

    def __aiter__(self) -> _PackageIterator:
        return self

    async def __anext__(self) -> InputStream:
        package = self._package
        if package is None:
            raise StopAsyncIteration
        s = await package._stream_at(self._index)
        if s is None:
            raise StopAsyncIteration
        self._index += 1
        return s

    async def aclose(self) -> None:
        """Stop iterating: later ``__anext__`` calls end at once, as a closed generator's do."""
        self._package = None


class PackageFeed:
    """The feeding side of one :class:`InputPackage`: streams arrive, the body ends or fails.

    :ivar package: the package fed, as the handler reads it.
    """

    __slots__ = ("package",)

    def __init__(
        self,
        package: InputPackage | None = None,
        *,
        before_block: Callable[[], Awaitable[None]] = _noop,
    ) -> None:
        self.package = package if package is not None else InputPackage()
        self.package._before_block = before_block

    def __repr__(self) -> str:
        return f"PackageFeed({self.package!r})"

    def add(self, stream: InputStream) -> None:
        """A stream arrived (its STREAM_START): iterators of the package see it next."""
        package = self.package
        package._streams.append(stream)
        package._wake()

    def end(self) -> None:
        """The body is complete: no further stream arrives."""
        package = self.package
        package._ended = True
        package._wake()

    def fail(self, exc: BaseException) -> None:
        """The input broke with ``exc``: every stream not read to its end raises it, and so
        does waiting for a further stream."""
        self.package._fail(exc)

    def detach(self) -> None:
        """Drop the package's ``before_block`` hook (it points back at the request)."""
        self.package._before_block = _noop


def bind_definition(package: InputPackage, cap_urn: str, definition: Any) -> None:
    """Name the cap definition that ``package``'s lookups by argument name resolve through."""
    package._cap_urn = cap_urn
    package._definition = definition
    package._args = None


def package_from_bytes(inputs: list[tuple[str, bytes]]) -> InputPackage:
    """A complete package of one-chunk scalar streams (CLI mode, tests)."""
    streams = []
    for i, (urn, data) in enumerate(inputs):
        s = InputStream(f"arg-{i}", urn)
        feed = StreamFeed(s)
        if data:
            feed.push_data(bytes(data))
        feed.push_end()
        streams.append(s)
    return InputPackage(streams, complete=True)
