"""The cartridge's stdin as an anyio byte stream whose reads run in the event loop's reader
callback (on asyncio).

:class:`LoopReceiveStream` is :class:`~cartridge_runtime._plumbing.FdReceiveStream` with the
session's reading entry point, :meth:`LoopReceiveStream.pump`: once the handshake is done the
session reads through it, and on asyncio the loop's reader callback
(:func:`~cartridge_runtime._plumbing.read_fd`) hands each block straight to the session's
synchronous dispatch, so a request costs no task switch and no future on the reading side.
Other backends read with :meth:`~cartridge_runtime._plumbing.FdReceiveStream.receive`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import sniffio

from cartridge_runtime._plumbing import READ_SIZE, Block, FdReceiveStream


class LoopReceiveStream(FdReceiveStream):
    """:class:`FdReceiveStream` with :meth:`pump` (see the module docstring). EOF raises
    :class:`anyio.EndOfStream`."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self._buffer: memoryview | None = None

    async def pump(
        self,
        on_block: Callable[[Block], bool],
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
        if sniffio.current_async_library() != "asyncio":
            return False
        buffer = self._buffer
        if buffer is None:
            # Every read lands in this one buffer: no allocation per read.
            buffer = self._buffer = memoryview(bytearray(READ_SIZE))
        await self.stream_blocks(buffer, read_size, on_block, until_drained)
        return True
