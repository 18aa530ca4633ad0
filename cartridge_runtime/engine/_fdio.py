"""Pipes to a cartridge as raw non-blocking file descriptors.

The engine makes the stdin/stdout pipes itself so it can enlarge them (``F_SETPIPE_SZ`` on
Linux: 1 MiB instead of 64 KiB means a 256 KiB CHUNK crosses in one write, not four
ping-pongs between the processes) and read them in large blocks without an intermediate
stream buffer. :func:`anyio.wait_readable`/:func:`anyio.wait_writable` make this work on
asyncio and trio alike, without helper threads.

:func:`read_blocks` is the reading loop. On asyncio it registers one reader callback for the
whole life of the pipe and handles each block inside it: no task wake-up, no ``epoll_ctl``
pair and no failed ``read`` per block, which is most of the cost of a small call's response.
On other backends it is a plain loop over :meth:`FdReader.receive`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import anyio
import sniffio

#: Pipe size asked for (the kernel caps it at /proc/sys/fs/pipe-max-size).
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
#: Most buffers handed to one writev call (POSIX guarantees at least 16; Linux allows 1024).
_IOV_MAX = 512  # fcntl.F_SETPIPE_SZ (Linux), absent from older fcntl modules


def make_pipe() -> tuple[int, int]:
    """An ``(r, w)`` pipe, enlarged where the platform allows; both ends inheritable off."""
    r, w = os.pipe()
    with contextlib.suppress(OSError, ImportError):
        import fcntl

        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), PIPE_SIZE)
    return r, w


class FdReader:
    """Reads a non-blocking fd; ``b""`` at EOF."""

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


class FdWriter:
    """Writes a non-blocking fd; a gone reader raises :class:`anyio.BrokenResourceError`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.closed = False

    async def send_all(self, parts: list[bytes | memoryview]) -> None:
        """Write every buffer in order with ``writev`` (no joining copies), however many
        calls the pipe needs."""
        views = [memoryview(p) for p in parts if p]
        while views:
            if self.closed:
                raise anyio.ClosedResourceError
            try:
                n = os.writev(self.fd, views[:_IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            while n:
                head = views[0]
                if n >= len(head):
                    n -= len(head)
                    views.pop(0)
                else:
                    views[0] = head[n:]
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
            chunk = parts[pos : pos + _IOV_MAX]
            try:
                n = os.writev(self.fd, chunk)
            except BlockingIOError:
                return parts[pos:]
            except OSError as exc:
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

    async def send(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            if self.closed:
                raise anyio.ClosedResourceError
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            view = view[n:]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            anyio.notify_closing(self.fd)
            os.close(self.fd)


async def read_blocks(reader: FdReader, size: int, on_data: Callable[[bytes], None]) -> None:
    """Call ``on_data`` with every block read from ``reader`` (at most ``size`` bytes), in
    order, and finally with ``b""`` at end of file; return after that.

    :raises Exception: whatever ``on_data`` raised (reading stops there).
    """
    if sniffio.current_async_library() != "asyncio" or reader.closed:
        while True:
            data = await reader.receive(size)
            on_data(data)
            if not data:
                return
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    fd = reader.fd

    def on_readable() -> None:
        if done.done():
            return
        try:
            try:
                data = os.read(fd, size)
            except BlockingIOError:
                return
            except OSError:
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
