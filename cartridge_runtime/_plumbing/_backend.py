"""Every asyncio-specific fast path of the IO plumbing, each with a plain anyio fallback.

anyio runs the same code on asyncio and trio, but two of its general tools cost more than a
small call can afford on asyncio, the backend both shells normally run on:

- :func:`anyio.wait_readable` registers the fd with the selector and removes it again on every
  wait: an ``epoll_ctl`` pair, a failed ``read`` and a task wake-up per block. :func:`read_fd`
  instead registers one reader callback with the event loop for as long as reading goes on and
  handles each block inside it (the read, the decoding, the dispatch), with no task switch.
  Reading pauses, and the callback is removed, only while the consumer asks for a pause.
- waking a task to write a batch of frames costs a task switch; :func:`soon_caller` gives the
  loop's ``call_soon``, so a writer can flush the batch from one loop callback instead.

Elsewhere (trio, or asyncio without a running loop) :func:`read_fd` is a loop over
``readv`` and :func:`anyio.wait_readable`, and :func:`soon_caller` returns ``None`` (the writer
then wakes its task). Nothing else in the package looks at the backend.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.lowlevel
import sniffio

if TYPE_CHECKING:
    import asyncio

#: A block of bytes read or to be written: bytes, or a view of a reusable buffer.
Block = bytes | memoryview


class Cancellable(Protocol):
    """What scheduling a callback returns (an :class:`asyncio.Handle`)."""

    def cancel(self) -> None: ...


#: Schedules a plain callback to run soon in the event loop, outside any task.
SoonCaller = Callable[[Callable[[], None]], Cancellable]


def soon_caller() -> SoonCaller | None:
    """The running asyncio loop's ``call_soon``; ``None`` on another backend.

    Callbacks run in a copy of the caller's context, outside any task: the library is declared
    in this context so that anyio calls made inside them find the backend.
    """
    if sniffio.current_async_library() != "asyncio":
        return None
    import asyncio

    sniffio.current_async_library_cvar.set("asyncio")
    return asyncio.get_running_loop().call_soon


def event_factory() -> Callable[[], anyio.Event]:
    """The running backend's event class, to make events without anyio's per-call backend
    look-up (``anyio.Event()`` finds the backend on every call)."""
    return type(anyio.Event())


class Wake(Protocol):
    """A one-shot wake-up one task waits on (``await wake.wait()``) and anyone sets."""

    def set(self) -> object: ...
    def wait(self) -> Awaitable[object]: ...


class _FutureWake:
    """The wake-up on asyncio: a bare future, awaited directly. (``anyio.Event`` wraps an
    ``asyncio.Event``, which makes a future per waiter, keeps a queue of them, and adds two
    coroutines to each wait.) Setting it after its waiter was cancelled does nothing."""

    __slots__ = ("_fut",)

    def __init__(self) -> None:
        import asyncio

        self._fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def set(self) -> None:
        fut = self._fut
        if not fut.done():
            fut.set_result(None)

    def wait(self) -> Awaitable[None]:
        return self._fut


def wake_factory() -> Callable[[], Wake]:
    """What makes the running backend's one-shot wake-ups: a bare future on asyncio, an
    ``anyio.Event`` elsewhere."""
    if sniffio.current_async_library() == "asyncio":
        return _FutureWake
    return type(anyio.Event())


async def read_fd(
    fd: int,
    buffer: memoryview,
    next_size: Callable[[], int],
    on_block: Callable[[Block], bool],
    until_drained: Callable[[], Awaitable[None]],
    is_closed: Callable[[], bool],
) -> None:
    """Read the non-blocking ``fd`` until end of file, handing every block to ``on_block``
    and finally ``b""`` (also for a failed read, or once ``is_closed()``); return after that.

    Each read lands in ``buffer`` and asks for ``next_size()`` bytes (at most the buffer);
    ``on_block`` gets a view of it, valid only until it returns. When ``on_block`` returns
    ``False`` reading pauses until ``await until_drained()`` returns.

    :raises Exception: whatever ``on_block`` or ``until_drained`` raised (reading stops).
    """
    if _always_ready(fd):
        await _read_fd_ready(fd, buffer, next_size, on_block, until_drained, is_closed)
        return
    if sniffio.current_async_library() == "asyncio" and not is_closed():
        await _read_fd_asyncio(fd, buffer, next_size, on_block, until_drained, is_closed)
        return
    while True:
        n = 0
        want = buffer[: next_size()]  # asked once per block, however long it takes to come
        while not is_closed():
            try:
                n = os.readv(fd, [want])
            except BlockingIOError:
                # Closed meanwhile: the next turn reports the end.
                with contextlib.suppress(anyio.ClosedResourceError):
                    await anyio.wait_readable(fd)
                continue
            except OSError:
                n = 0
            break
        if not on_block(buffer[:n] if n else b""):
            await until_drained()
        if not n:
            return


async def _read_fd_asyncio(
    fd: int,
    buffer: memoryview,
    next_size: Callable[[], int],
    on_block: Callable[[Block], bool],
    until_drained: Callable[[], Awaitable[None]],
    is_closed: Callable[[], bool],
) -> None:
    """:func:`read_fd` from a reader callback registered with the loop (see the module
    docstring)."""
    import asyncio

    loop = asyncio.get_running_loop()
    # The callback runs in a copy of this task's context, outside any task: declaring the
    # library there lets the anyio calls a dispatch makes (start_soon...) find the backend.
    sniffio.current_async_library_cvar.set("asyncio")
    while True:
        # Result: (the end of file was reached, on_block asked for a pause).
        done: asyncio.Future[tuple[bool, bool]] = loop.create_future()

        def on_readable(done: asyncio.Future[tuple[bool, bool]] = done) -> None:
            if done.done():
                return
            try:
                n = os.readv(fd, [buffer[: next_size()]])
            except BlockingIOError:
                return
            except OSError:
                n = 0  # a failed read ends the input, as EOF does
            try:
                more = on_block(buffer[:n] if n else b"")
            except Exception as exc:
                done.set_exception(exc)
            else:
                if n and more:
                    return
                done.set_result((not n, not more))
            loop.remove_reader(fd)

        try:
            loop.add_reader(fd, on_readable)
        except PermissionError:  # a file the selector cannot watch (/dev/null...)
            await _read_fd_ready(fd, buffer, next_size, on_block, until_drained, is_closed)
            return
        try:
            eof, paused = await done
        finally:
            if not is_closed():
                loop.remove_reader(fd)
        if paused:
            await until_drained()
        if eof:
            return
        if is_closed():
            on_block(b"")
            return


def _always_ready(fd: int) -> bool:
    """Whether ``fd`` is a regular file: always readable, and refused by ``epoll``."""
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


async def _read_fd_ready(
    fd: int,
    buffer: memoryview,
    next_size: Callable[[], int],
    on_block: Callable[[Block], bool],
    until_drained: Callable[[], Awaitable[None]],
    is_closed: Callable[[], bool],
) -> None:
    """:func:`read_fd` for a file that never has to be waited for (a regular file, a
    replayed capture; ``/dev/null``): plain reads, with a checkpoint after each block so that
    the tasks the frames start get their turns while the file is read."""
    while True:
        n = 0
        if not is_closed():
            try:
                n = os.readv(fd, [buffer[: next_size()]])
            except OSError:
                n = 0  # a failed read ends the input, as EOF does
        if not on_block(buffer[:n] if n else b""):
            await until_drained()
        if not n:
            return
        await anyio.lowlevel.checkpoint()
