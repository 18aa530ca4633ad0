"""The cartridge's stdin as an anyio byte stream that stays registered with the event loop.

:class:`~cartridge_runtime._fdio.FdReceiveStream` waits for data with
:func:`anyio.wait_readable`, which registers the fd with the selector and removes it again on
every wait (an ``epoll_ctl`` pair, a failed ``read`` and several Python objects per small
request). On asyncio, :class:`LoopReceiveStream` instead registers one reader callback while
a receive waits and keeps it registered across waits; the callback does the read itself, so
the fd never stays readable behind the loop's back (no busy wake-ups). Data the callback read
is kept on the stream, never in the waiter, so a cancelled receive loses nothing. Other
backends use the plain loop.

The session reads through :meth:`LoopReceiveStream.pump` once the handshake is done: the
reader callback then hands each block straight to the session's synchronous dispatch, so a
request costs no task switch and no future on the reading side.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import anyio
import sniffio

from cartridge_runtime._fdio import READ_SIZE, FdReceiveStream


class LoopReceiveStream(FdReceiveStream):
    """:class:`FdReceiveStream` with a persistent reader callback on asyncio (see the module
    docstring). EOF raises :class:`anyio.EndOfStream`."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registered = False
        self._want = READ_SIZE
        #: What the callback read and no receive has taken yet (``b""`` = EOF), or the
        #: OSError it met.
        self._pending: bytes | OSError | None = None
        self._waiter: asyncio.Future[None] | None = None

    def _on_readable(self) -> None:
        waiter = self._waiter
        if waiter is None or self._pending is not None:
            # Nobody waits: stop watching until the next receive (no busy wake-ups).
            self._unregister()
            return
        try:
            self._pending = os.read(self.fd, self._want)
        except BlockingIOError:
            return
        except OSError as exc:
            self._pending = exc
        if not self._pending:
            self._unregister()
        if not waiter.done():
            waiter.set_result(None)

    def _unregister(self) -> None:
        if self._registered and self._loop is not None:
            self._registered = False
            self._loop.remove_reader(self.fd)

    def _take(self) -> bytes:
        pending, self._pending = self._pending, None
        if isinstance(pending, OSError):
            raise anyio.BrokenResourceError(str(pending)) from pending
        if not pending:
            raise anyio.EndOfStream
        return pending

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next block, at most ``max_bytes``.

        :raises anyio.EndOfStream: end of file.
        :raises anyio.BrokenResourceError: the read failed.
        """
        if self._pending is not None:
            return self._take()
        loop = self._loop
        if loop is None:
            if sniffio.current_async_library() != "asyncio":
                return await super().receive(max_bytes)
            loop = self._loop = asyncio.get_running_loop()
        try:
            data = os.read(self.fd, max_bytes)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise anyio.BrokenResourceError(str(exc)) from exc
        else:
            if not data:
                raise anyio.EndOfStream
            return data
        self._want = max_bytes
        while self._pending is None:
            waiter = self._waiter = loop.create_future()
            if not self._registered:
                self._registered = True
                loop.add_reader(self.fd, self._on_readable)
            try:
                await waiter
            finally:
                self._waiter = None
        return self._take()

    async def pump(
        self,
        on_block: Callable[[bytes | memoryview], bool],
        read_size: Callable[[], int],
        until_drained: Callable[[], Awaitable[None]],
    ) -> bool:
        """Read from the event loop's reader callback, handing each block to ``on_block``
        right there (``b""`` at end of file, or when the read fails); return ``True`` after
        the end of file. A block is a view of one reusable buffer, valid only until
        ``on_block`` returns.

        ``read_size()`` gives the size of each read. When ``on_block`` returns ``False``,
        reading pauses until ``await until_drained()`` returns. On a backend other than
        asyncio, returns ``False`` at once: the caller then reads with :meth:`receive`.

        :raises Exception: whatever ``on_block`` or ``until_drained`` raised (reading stops).
        """
        if self._pending is not None or sniffio.current_async_library() != "asyncio":
            return False
        loop = self._loop = asyncio.get_running_loop()
        fd = self.fd
        # Every read lands in this one buffer: no allocation per read (a view of it is
        # handed to on_block, valid until on_block returns).
        view = memoryview(bytearray(READ_SIZE))
        # The callback runs outside any task, in a copy of this task's context: declaring the
        # library there lets the anyio calls that dispatch makes (start_soon...) find it.
        sniffio.current_async_library_cvar.set("asyncio")
        while True:
            # Result: (end of file reached, on_block wants a pause).
            done: asyncio.Future[tuple[bool, bool]] = loop.create_future()

            def on_readable(done: asyncio.Future[tuple[bool, bool]] = done) -> None:
                if done.done():
                    return
                data: bytes | memoryview
                try:
                    data = view[: os.readv(fd, [view[: read_size()]])]
                except BlockingIOError:
                    return
                except OSError:
                    data = b""  # a failed read ends the input, as EOF does
                if not data:
                    data = b""
                try:
                    more = on_block(data)
                except Exception as exc:
                    done.set_exception(exc)
                else:
                    if data and more:
                        return
                    done.set_result((not data, not more))
                self._unregister()

            self._registered = True
            loop.add_reader(fd, on_readable)
            try:
                eof, paused = await done
            finally:
                self._unregister()
            if paused:
                await until_drained()
            if eof:
                return True

    def restore(self) -> None:
        self._unregister()
        super().restore()
