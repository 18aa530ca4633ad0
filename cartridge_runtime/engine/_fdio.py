"""Pipes to a cartridge as raw non-blocking file descriptors.

The engine makes the stdin/stdout pipes itself so it can enlarge them (``F_SETPIPE_SZ`` on
Linux: 1 MiB instead of 64 KiB means a 256 KiB CHUNK crosses in one write, not four
ping-pongs between the processes) and read them in large blocks without an intermediate
stream buffer. :func:`anyio.wait_readable`/:func:`anyio.wait_writable` make this work on
asyncio and trio alike, without helper threads.
"""

from __future__ import annotations

import contextlib
import os

import anyio

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

    async def send_all(self, parts: list[bytes]) -> None:
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
