"""Non-blocking pipe IO on raw file descriptors, shared by the engine and the cartridge runtime.

Both ends of a Bifaci connection talk over pipes, and both want the same things from them:
large reads without an intermediate stream buffer, gathering writes (``writev``) so a batch of
frames costs one system call and no joining copy, and a pipe enlarged where the OS allows it
(``F_SETPIPE_SZ`` on Linux: 1 MiB instead of 64 KiB means a 256 KiB CHUNK crosses in one write,
not four ping-pongs between the processes). :func:`anyio.wait_readable` and
:func:`anyio.wait_writable` make this work on asyncio and trio alike, without helper threads.

Two families of wrappers sit on the shared helpers, because their owners need different
contracts:

- the engine owns the pipes it makes (:func:`make_pipe`): :class:`FdReader` returns ``b""`` at
  EOF, :class:`FdWriter` adds a synchronous :meth:`FdWriter.write_now`, and both close their fd.
  :func:`read_blocks` is the engine's reading loop: on asyncio it registers one reader callback
  for the whole life of the pipe and handles each block inside it (no task wake-up, no
  ``epoll_ctl`` pair and no failed ``read`` per block, which is most of the cost of a small
  call's response); on other backends it is a plain loop over :meth:`FdReader.receive`.
- a cartridge borrows its stdin/stdout: :class:`FdReceiveStream` and :class:`FdSendStream` are
  anyio byte streams that enlarge the pipe, raise :class:`anyio.EndOfStream` at EOF, and put the
  fd back in its original blocking mode instead of closing it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import ClassVar

import anyio
import anyio.abc
import sniffio

#: Largest single read: big enough that a 256 KiB chunk frame needs one syscall.
READ_SIZE = 1 << 20
#: Pipe size asked for (the kernel caps it at /proc/sys/fs/pipe-max-size).
PIPE_SIZE = 1 << 20
#: ``fcntl.F_SETPIPE_SZ`` (Linux), absent from older fcntl modules.
_F_SETPIPE_SZ = 1031
#: Most buffers handed to one ``writev`` call (POSIX guarantees at least 16; Linux allows 1024).
IOV_MAX = 1024


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


class _FdWriteLoops:
    """The blocking-free write loops both writers share: wait for room while the pipe is full,
    advance over partial writes, map "reader gone" to :class:`anyio.BrokenResourceError`.

    Written as methods that subclasses alias under their own public names (no extra call or
    keyword arguments on the hot path); ``closed`` and ``_broken`` are the per-class knobs.
    """

    fd: int
    #: True once an owner closed the fd; checked before every system call so a closed (and
    #: possibly reused) fd number is never written.
    closed: bool = False
    #: The OSErrors that mean the reading end is gone; any other OSError propagates as itself.
    _broken: ClassVar[tuple[type[OSError], ...]] = (OSError,)

    async def _write_all(self, item: bytes | memoryview) -> None:
        """Write all of ``item``.

        :raises anyio.ClosedResourceError: the writer was closed meanwhile.
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

    async def _writev_all(self, parts: Sequence[bytes | memoryview]) -> None:
        """Write every buffer of ``parts`` in order with gathering writes (``writev``: one
        system call for a batch of frames, no joining copy), however many calls the pipe
        needs; empty buffers are skipped.

        :raises anyio.ClosedResourceError: the writer was closed meanwhile.
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

    def write_now(self, parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
        """Write as much of ``parts`` as the pipe takes without blocking; returns the rest
        (the first buffer possibly cut), ``[]`` when everything was written.

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


# --- the engine's side: pipes it made and owns ----------------------------------------------


class FdReader:
    """Reads a non-blocking fd it owns; ``b""`` at EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.closed = False

    async def receive(self, max_bytes: int) -> bytes:
        while True:
            if self.closed:
                return b""
            try:
                return os.read(self.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
            except OSError:
                return b""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            anyio.notify_closing(self.fd)
            os.close(self.fd)


class FdWriter(_FdWriteLoops):
    """Writes a non-blocking fd it owns; a gone reader raises :class:`anyio.BrokenResourceError`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.closed = False

    #: ``await send_all(parts)``: every buffer in order with ``writev``.
    send_all = _FdWriteLoops._writev_all
    #: ``await send(item)``: all of one buffer.
    send = _FdWriteLoops._write_all

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            anyio.notify_closing(self.fd)
            os.close(self.fd)


async def read_blocks(
    reader: FdReader,
    size: int,
    on_data: Callable[[bytes | memoryview], None],
    next_size: Callable[[], int] | None = None,
    buffer: bytearray | None = None,
) -> None:
    """Call ``on_data`` with every block read from ``reader``, in order, and finally with
    ``b""`` at end of file; return after that.

    Each read asks for ``next_size()`` bytes when given (a frame decoder asks for just the
    rest of a frame it is in the middle of, so that the next read starts on a frame boundary),
    else for ``size``. With ``buffer`` (used on asyncio), every read lands in that one buffer
    and ``on_data`` gets a view of it, valid only until it returns: no allocation per read.

    :raises Exception: whatever ``on_data`` raised (reading stops there).
    """
    if sniffio.current_async_library() != "asyncio" or reader.closed:
        while True:
            data = await reader.receive(size if next_size is None else next_size())
            on_data(data)
            if not data:
                return
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    fd = reader.fd

    view = memoryview(buffer) if buffer is not None else None

    def on_readable() -> None:
        if done.done():
            return
        try:
            want = size if next_size is None else next_size()
            data: bytes | memoryview
            try:
                if view is None:
                    data = os.read(fd, want)
                else:
                    data = view[: os.readv(fd, [view[: min(want, len(view))]])]
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                data = b""
            on_data(data)
            if not data:
                done.set_result(None)
        except Exception as exc:
            done.set_exception(exc)
        if done.done():
            loop.remove_reader(fd)

    # The callback runs in a copy of this task's context, outside any task: declaring the
    # library there lets the anyio calls a dispatch makes (start_soon...) find the backend.
    sniffio.current_async_library_cvar.set("asyncio")
    loop.add_reader(fd, on_readable)
    try:
        await done
    finally:
        if not reader.closed:
            loop.remove_reader(fd)


# --- the cartridge's side: borrowed stdin/stdout as anyio byte streams -----------------------


class _BorrowedFd:
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


class FdReceiveStream(_BorrowedFd, anyio.abc.ByteReceiveStream):
    """Reads from a file descriptor (stdin). EOF raises :class:`anyio.EndOfStream`."""

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

    async def aclose(self) -> None:
        self.restore()


class FdSendStream(_BorrowedFd, _FdWriteLoops, anyio.abc.ByteSendStream):
    """Writes to a file descriptor (stdout); a closed reader raises
    :class:`anyio.BrokenResourceError`."""

    #: What a cartridge's stdout treats as "the engine went away"; any other OSError
    #: propagates as itself.
    _broken = (BrokenPipeError, ConnectionResetError)

    #: ``await send(item)``: all of one buffer.
    send = _FdWriteLoops._write_all
    #: ``await send_many(items)``: several buffers in order with gathering writes (``writev``):
    #: one system call for a batch of frames, without joining them into one buffer first.
    send_many = _FdWriteLoops._writev_all

    async def aclose(self) -> None:
        self.restore()
