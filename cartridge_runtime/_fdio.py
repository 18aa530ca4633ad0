"""Non-blocking pipe IO on raw file descriptors: the names the engine and the runtime import,
now kept in :mod:`cartridge_runtime._plumbing` (see :mod:`cartridge_runtime._plumbing._fd`).

:func:`read_blocks` is the engine's reading loop in its older form (a block size and a
callback without a pause), over :func:`~cartridge_runtime._plumbing.read_fd`.
"""

from __future__ import annotations

from collections.abc import Callable

from cartridge_runtime._plumbing import (
    IOV_MAX,
    PIPE_SIZE,
    READ_SIZE,
    Block,
    FdReader,
    FdReceiveStream,
    FdSendStream,
    FdSink,
    FdWriter,
    grow_pipe,
    make_pipe,
    read_fd,
)

__all__ = (
    "READ_SIZE",
    "PIPE_SIZE",
    "IOV_MAX",
    "FdReader",
    "FdReceiveStream",
    "FdSendStream",
    "FdSink",
    "FdWriter",
    "grow_pipe",
    "make_pipe",
    "read_blocks",
)


async def read_blocks(
    reader: FdReader,
    size: int,
    on_data: Callable[[Block], None],
    next_size: Callable[[], int] | None = None,
    buffer: bytearray | None = None,
) -> None:
    """Call ``on_data`` with every block read from ``reader``, in order, and finally with
    ``b""`` at end of file; return after that.

    Each read asks for ``next_size()`` bytes when given, else for ``size``. With ``buffer``,
    every read lands in that one buffer and ``on_data`` gets a view of it, valid only until it
    returns; without one, ``on_data`` gets bytes it may keep.

    :raises Exception: whatever ``on_data`` raised (reading stops there).
    """

    def fixed() -> int:
        return size

    if buffer is None:
        view = memoryview(bytearray(size))

        def on_block(data: Block) -> bool:
            on_data(bytes(data))
            return True
    else:
        view = memoryview(buffer)

        def on_block(data: Block) -> bool:
            on_data(data)
            return True

    await read_fd(
        reader.fd,
        view,
        fixed if next_size is None else next_size,
        on_block,
        _never,
        reader.is_closed,
    )


async def _never() -> None:
    """No pause is ever asked for (``on_block`` always returns ``True``)."""
