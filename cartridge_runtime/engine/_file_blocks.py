"""A file input's bytes in large blocks, read in the event loop when the page cache holds
them and in a worker thread only when the disk must be waited for.

A thread hop per read costs more than the read itself when the file is cached (the usual case:
it was just written, or is read again), and on a loaded host a hop waits for a time slice.
``os.RWF_NOWAIT`` asks the kernel for the cached bytes only: it answers at once, with what the
cache holds, or refuses (``BlockingIOError``), and only then is the read given to a thread.
Each block is a fresh buffer that the caller may keep (its chunks are queued, not copied).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Final

import anyio.to_thread

__all__ = ("FILE_BLOCK", "file_blocks")

#: Bytes read at once (the stream then cuts them into chunks without copying).
FILE_BLOCK: Final = 1 << 20
#: ``os.RWF_NOWAIT`` where the system has it.
_NOWAIT: Final = getattr(os, "RWF_NOWAIT", None)


def _read_cached(fd: int, buffer: bytearray, offset: int) -> int | None:
    """Bytes read at ``offset`` from the page cache alone; ``None`` when the disk must be
    waited for, or the file system does not answer that question."""
    if _NOWAIT is None:
        return None
    try:
        return os.preadv(fd, [buffer], offset, _NOWAIT)
    except OSError:  # BlockingIOError: not cached; any other: the flag is not taken here
        return None


def _read_waiting(fd: int, buffer: bytearray, offset: int) -> int:
    return os.preadv(fd, [buffer], offset)


async def file_blocks(fd: int, block: int = FILE_BLOCK) -> AsyncIterator[memoryview]:
    """The bytes of the regular file open at ``fd``, from its start, block by block."""
    offset = 0
    while True:
        buffer = bytearray(block)
        got = _read_cached(fd, buffer, offset)
        if got is None:
            got = await anyio.to_thread.run_sync(_read_waiting, fd, buffer, offset)
        if not got:
            return
        offset += got
        yield memoryview(buffer)[:got]
