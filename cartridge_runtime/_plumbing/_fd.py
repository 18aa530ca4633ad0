"""Non-blocking pipe IO on raw file descriptors, for the engine and the cartridge alike.

Both ends of a Bifaci connection talk over pipes, and both want the same things from them:
large reads without an intermediate stream buffer, gathering writes (``writev``) so a batch of
frames costs one system call and no joining copy, and a pipe enlarged where the OS allows it
(``F_SETPIPE_SZ`` on Linux: 1 MiB instead of 64 KiB means a 256 KiB CHUNK crosses in one write,
not four ping-pongs between the processes). :func:`anyio.wait_readable` and
:func:`anyio.wait_writable` make this work on asyncio and trio alike, without helper threads.

The write loops live in one class, :class:`FdSink`, which both writing ends *hold* (no mixin):

- the engine owns the pipes it makes (:func:`make_pipe`): :class:`FdReader` is an anyio byte
  stream (a subprocess's stdout, as anyio's ``Process.stdout``) that reads blocks for a
  :class:`~._pump.FramePump` itself (:meth:`FdReader.stream_blocks`); :class:`FdWriter` is an
  :class:`FdSink`. Both close their fd.
- a cartridge borrows its stdin/stdout: :class:`FdReceiveStream` and :class:`FdSendStream` are
  anyio byte streams that enlarge the pipe, raise :class:`anyio.EndOfStream` at EOF, and put
  the fd back in its original blocking mode instead of closing it. :attr:`FdSendStream.sink`
  is the :class:`FdSink` a :class:`~._outbox.FrameOutbox` writes through directly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence

import anyio
import anyio.abc

from ._backend import Block, read_fd

#: Largest single read: big enough that a 256 KiB chunk frame needs one syscall.
READ_SIZE = 1 << 20
#: Pipe size asked for (the kernel caps it at /proc/sys/fs/pipe-max-size).
PIPE_SIZE = 1 << 20
#: ``fcntl.F_SETPIPE_SZ`` (Linux), absent from older fcntl modules.
_F_SETPIPE_SZ = 1031
#: Most buffers handed to one ``writev`` call (POSIX guarantees at least 16; Linux allows 1024).
IOV_MAX = 1024
#: The OSErrors a borrowed stdout treats as "the engine went away"; any other OSError
#: propagates as itself.
PEER_GONE: tuple[type[OSError], ...] = (BrokenPipeError, ConnectionResetError)


def grow_pipe(fd: int) -> None:
    """Enlarge a pipe's kernel buffer where the OS allows it (best effort, silent: a non-pipe
    fd or a platform without ``F_SETPIPE_SZ`` keeps its size)."""
    with contextlib.suppress(ImportError, OSError, ValueError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), PIPE_SIZE)


def make_pipe() -> tuple[int, int]:
    """An ``(r, w)`` pipe, enlarged where the platform allows; both ends inheritable off."""
    r, w = os.pipe()
    grow_pipe(w)
    return r, w


class FdSink:
    """Writes a non-blocking fd: waits for room while the pipe is full, advances over partial
    writes, maps "reader gone" to :class:`anyio.BrokenResourceError`.

    :param fd: the fd, switched to non-blocking here.
    :param broken: the OSErrors that mean the reading end is gone (default: any OSError).
    :param owned: whether :meth:`close` closes the fd (else it only stops writing to it).
    """

    def __init__(
        self, fd: int, *, broken: tuple[type[OSError], ...] = (OSError,), owned: bool = True
    ) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        #: True once closed; checked before every system call so a closed (and possibly
        #: reused) fd number is never written.
        self.closed = False
        self._broken = broken
        self._owned = owned

    async def send(self, item: bytes | memoryview) -> None:
        """Write all of ``item``.

        :raises anyio.ClosedResourceError: the sink was closed meanwhile.
        :raises anyio.BrokenResourceError: the reading end is gone.
        """
        view = memoryview(item)
        while view:
            if self.closed:
                raise anyio.ClosedResourceError
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except self._broken as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            view = view[n:]

    async def send_all(self, parts: Sequence[Block]) -> None:
        """Write every buffer of ``parts`` in order with gathering writes (``writev``: one
        system call for a batch of frames, no joining copy), however many calls the pipe
        needs; empty buffers are skipped.

        :raises anyio.ClosedResourceError: the sink was closed meanwhile.
        :raises anyio.BrokenResourceError: the reading end is gone.
        """
        views = [memoryview(p) for p in parts if p]
        i = 0
        while i < len(views):
            if self.closed:
                raise anyio.ClosedResourceError
            try:
                n = os.writev(self.fd, views[i : i + IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except self._broken as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            while n:
                size = len(views[i])
                if n >= size:
                    n -= size
                    i += 1
                else:
                    views[i] = views[i][n:]
                    n = 0

    def write_now(self, parts: list[Block]) -> list[Block]:
        """Write as much of ``parts`` as the pipe takes without blocking; returns the rest
        (the first buffer possibly cut), ``[]`` when everything was written.

        :raises anyio.ClosedResourceError: the sink was closed.
        :raises anyio.BrokenResourceError: the reading end is gone.
        """
        if self.closed:
            raise anyio.ClosedResourceError
        pos = 0
        end = len(parts)
        while pos < end:
            chunk = parts[pos : pos + IOV_MAX]
            try:
                n = os.writev(self.fd, chunk)
            except BlockingIOError:
                return parts[pos:]
            except self._broken as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            if n == sum(map(len, chunk)):  # the usual case: the pipe took all of it
                pos += len(chunk)
                continue
            for buf in chunk:
                size = len(buf)
                if n >= size:
                    n -= size
                    pos += 1
                else:
                    rest = parts[pos:]
                    rest[0] = memoryview(buf)[n:]
                    return rest
        return []

    def close(self) -> None:
        """Stop writing (later writes raise :class:`anyio.ClosedResourceError`); an owned fd
        is closed."""
        if not self.closed:
            self.closed = True
            if self._owned:
                anyio.notify_closing(self.fd)
                os.close(self.fd)


# --- the engine's side: pipes it made and owns ----------------------------------------------


class FdReader(anyio.abc.ByteReceiveStream):
    """Reads a non-blocking fd it owns: a process's stdout as a byte stream. EOF (or a failed
    read) raises :class:`anyio.EndOfStream`; :meth:`stream_blocks` reads blocks for a
    :class:`~._pump.FramePump` without a task switch per block (see :func:`~._backend.read_fd`).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next block, at most ``max_bytes``.

        :raises anyio.EndOfStream: end of file, a failed read, or the reader was closed.
        """
        while True:
            if self.closed:
                raise anyio.EndOfStream
            try:
                data = os.read(self.fd, max_bytes)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.fd)
                except anyio.ClosedResourceError:
                    raise anyio.EndOfStream from None
                continue
            except OSError:
                raise anyio.EndOfStream from None
            if not data:
                raise anyio.EndOfStream
            return data

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        """Read blocks into ``buffer`` for ``on_block`` until EOF (see
        :func:`~._backend.read_fd`)."""
        await read_fd(self.fd, buffer, next_size, on_block, until_drained, self.is_closed)

    def close(self) -> None:
        """Close the fd (a read in progress ends as at EOF)."""
        if not self.closed:
            self.closed = True
            anyio.notify_closing(self.fd)
            os.close(self.fd)

    async def aclose(self) -> None:
        self.close()


class FdWriter(FdSink):
    """The engine's writing end of a pipe it made: an :class:`FdSink` that owns ``fd`` and
    takes any OSError as "the cartridge stopped reading"."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)


# --- the cartridge's side: borrowed stdin/stdout as anyio byte streams -----------------------


class _Borrowed:
    """A borrowed fd switched to non-blocking (its pipe enlarged), restorable afterwards."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        grow_pipe(fd)

    def restore(self) -> None:
        """Put the fd back in its original blocking mode."""
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, self._was_blocking)


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Reads from a borrowed file descriptor (stdin). EOF raises :class:`anyio.EndOfStream`;
    :meth:`stream_blocks` reads blocks for a :class:`~._pump.FramePump`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._borrowed = _Borrowed(fd)
        self._restored = False

    def _is_restored(self) -> bool:
        return self._restored

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next block, at most ``max_bytes``.

        :raises anyio.EndOfStream: end of file.
        :raises anyio.BrokenResourceError: the read failed.
        """
        while True:
            try:
                data = os.read(self.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        """Read blocks into ``buffer`` for ``on_block`` until EOF (see
        :func:`~._backend.read_fd`)."""
        await read_fd(self.fd, buffer, next_size, on_block, until_drained, self._is_restored)

    def restore(self) -> None:
        """Put the fd back in its original blocking mode."""
        self._restored = True
        self._borrowed.restore()

    async def aclose(self) -> None:
        self.restore()


class FdSendStream(anyio.abc.ByteSendStream):
    """Writes to a borrowed file descriptor (stdout); a closed reader raises
    :class:`anyio.BrokenResourceError`. A :class:`~._outbox.FrameOutbox` writes through
    :attr:`sink` directly."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._borrowed = _Borrowed(fd)
        #: The write loops on the fd (not owned: closing the sink leaves the fd open).
        self.sink = FdSink(fd, broken=PEER_GONE, owned=False)
        #: ``await send_many(items)``: several buffers in order with one gathering write.
        self.send_many = self.sink.send_all
        #: ``write_now(parts)``: what the pipe takes without blocking; returns the rest.
        self.write_now = self.sink.write_now

    async def send(self, item: bytes) -> None:
        """Write all of ``item``.

        :raises anyio.BrokenResourceError: the reading end is gone.
        """
        await self.sink.send(item)

    def restore(self) -> None:
        """Put the fd back in its original blocking mode."""
        self._borrowed.restore()

    async def aclose(self) -> None:
        self.restore()
