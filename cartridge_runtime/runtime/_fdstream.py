"""anyio byte streams over raw file descriptors (stdin/stdout of a cartridge process).

Non-blocking fds with :func:`anyio.wait_readable` / :func:`anyio.wait_writable`: no helper
threads, large reads, partial writes handled. Works on asyncio and trio (POSIX).
"""

from __future__ import annotations

import os

import anyio
import anyio.abc

#: Largest single read: big enough that a 256 KiB chunk frame needs one syscall.
READ_SIZE = 1 << 20
#: Pipe buffer size asked for (Linux ``F_SETPIPE_SZ``): fewer wake-ups per chunk frame.
PIPE_SIZE = 1 << 20
#: Most buffers one ``writev`` takes (POSIX IOV_MAX is at least 1024 on Linux).
IOV_MAX = 1024


def _grow_pipe(fd: int) -> None:
    """Enlarge a pipe's kernel buffer where the OS allows it (best effort, silent)."""
    try:
        import fcntl

        setsz = getattr(fcntl, "F_SETPIPE_SZ", 1031)
        fcntl.fcntl(fd, setsz, PIPE_SIZE)
    except (ImportError, OSError, ValueError):
        pass


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Reads from a file descriptor (stdin). EOF raises :class:`anyio.EndOfStream`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        _grow_pipe(fd)

    def restore(self) -> None:
        """Put the fd back in its original blocking mode."""
        try:
            os.set_blocking(self.fd, self._was_blocking)
        except OSError:
            pass

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
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


class FdSendStream(anyio.abc.ByteSendStream):
    """Writes to a file descriptor (stdout); a closed reader raises :class:`anyio.BrokenResourceError`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        _grow_pipe(fd)

    def restore(self) -> None:
        try:
            os.set_blocking(self.fd, self._was_blocking)
        except OSError:
            pass

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            view = view[n:]

    async def send_many(self, items: list[bytes]) -> None:
        """Write several buffers in order with gathering writes (``writev``): one system call
        for a batch of frames, without joining them into one buffer first."""
        views = [memoryview(b) for b in items if b]
        i = 0
        while i < len(views):
            try:
                n = os.writev(self.fd, views[i : i + IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            while n:
                size = len(views[i])
                if n >= size:
                    n -= size
                    i += 1
                else:
                    views[i] = views[i][n:]
                    n = 0

    async def aclose(self) -> None:
        self.restore()
