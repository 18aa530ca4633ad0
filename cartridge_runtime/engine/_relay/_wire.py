"""A relay link's bytes: the socket's file descriptor read and written directly.

A relay socket is a Unix stream socket, and a socket's fd reads and writes like a pipe's. So
a link gets the same fast paths as a cartridge's pipes: blocks read from the event loop's
reader callback straight into the pump's buffer (no task switch per block, no intermediate
``bytes``), and frames written in place with gathering writes (no wake-up of a writer task
per frame, large chunks passed as views, never joined). Any other byte stream (a memory
stream in a test, a TLS wrapper) keeps the generic path (:func:`source_for`,
:func:`sink_for`). The stream still owns the socket: this only borrows its fd, and stops
using it before the stream is closed.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from ..._plumbing import (
    Block,
    BlockSource,
    ByteSink,
    FdSink,
    read_fd,
    sink_for,
    source_for,
)

__all__ = ("LinkWire",)


class _SocketSource:
    """The socket's fd as a :class:`BlockSource` (the pump's reads)."""

    def __init__(self, fd: int, is_closed: Callable[[], bool]) -> None:
        self._fd = fd
        self._is_closed = is_closed

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        await read_fd(self._fd, buffer, next_size, on_block, until_drained, self._is_closed)


class LinkWire:
    """Where one relay link's frames are read from (:attr:`source`) and written to
    (:attr:`sink`); :meth:`stop` before the stream is closed."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stopped = False
        raw = _raw_socket(stream)
        self.source: BlockSource
        self.sink: ByteSink
        if raw is None:
            self.source, self.sink = source_for(stream), sink_for(stream)
            self._fd_sink: FdSink | None = None
            return
        fd = raw.fileno()
        self._fd_sink = FdSink(fd, owned=False)
        self.source = _SocketSource(fd, self._is_stopped)
        self.sink = self._fd_sink

    def _is_stopped(self) -> bool:
        return self.stopped

    def stop(self) -> None:
        """Stop reading and writing the fd (the stream closes it afterwards)."""
        self.stopped = True
        if self._fd_sink is not None:
            self._fd_sink.close()


def _raw_socket(stream: anyio.abc.ByteStream) -> socket.socket | None:
    """The Unix stream socket under ``stream``, or ``None`` for any other stream."""
    try:
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    except anyio.TypedAttributeLookupError:
        return None
    if not isinstance(raw, socket.socket) or raw.family != socket.AF_UNIX:
        return None
    if raw.type != socket.SOCK_STREAM or raw.fileno() < 0:
        return None
    return raw
