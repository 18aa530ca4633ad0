"""The output gate: mutual exclusion of one output's emissions, on asyncio and trio."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from cartridge_runtime.runtime._output import _Gate

BACKENDS = ["asyncio", "trio"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_holder_at_a_time_and_fifo_handoff(backend: str) -> None:
    async def main() -> list[str]:
        gate = _Gate()
        log: list[str] = []
        inside = 0

        async def user(name: str) -> None:
            nonlocal inside
            async with gate:
                inside += 1
                assert inside == 1
                log.append(f"{name}+")
                await anyio.sleep(0.001)  # yield while holding it
                log.append(f"{name}-")
                inside -= 1

        async with anyio.create_task_group() as tg:
            for name in "abcd":
                tg.start_soon(user, name)
                await anyio.lowlevel.checkpoint()  # queue them in this order
        return log

    log = anyio.run(main, backend=backend)
    assert log == ["a+", "a-", "b+", "b-", "c+", "c-", "d+", "d-"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_waiter_leaves_the_queue(backend: str) -> None:
    async def main() -> list[str]:
        gate = _Gate()
        log: list[str] = []
        release = anyio.Event()

        async def holder() -> None:
            async with gate:
                log.append("holder")
                await release.wait()

        async def waiter(name: str) -> None:
            async with gate:
                log.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await anyio.sleep(0.01)
            async with anyio.create_task_group() as inner:
                inner.start_soon(waiter, "cancelled")
                await anyio.sleep(0.01)
                inner.cancel_scope.cancel()
            tg.start_soon(waiter, "after")
            await anyio.sleep(0.01)
            release.set()
        return log

    assert anyio.run(main, backend=backend) == ["holder", "after"]


def test_a_waiter_cancelled_after_its_turn_came_passes_the_gate_on() -> None:
    # On asyncio a task can be cancelled after the event it waits on was set but before it
    # ran again: the gate was handed to it, and it must hand it on rather than lose it.
    async def main() -> list[str]:
        gate = _Gate()
        log: list[str] = []

        async def waiter(name: str) -> None:
            try:
                async with gate:
                    log.append(name)
            except asyncio.CancelledError:
                log.append(f"{name} cancelled")

        await gate.__aenter__()  # held by this task
        first = asyncio.create_task(waiter("first"))
        second = asyncio.create_task(waiter("second"))
        await asyncio.sleep(0.01)
        await gate.__aexit__(None, None, None)  # hands it to "first"...
        first.cancel()  # ...which is cancelled before it runs again
        await asyncio.gather(first, second)
        return log

    assert anyio.run(main, backend="asyncio") == ["first cancelled", "second"]


def test_uncontended_entry_does_not_touch_the_event_loop() -> None:
    gate = _Gate()
    coro = gate.__aenter__()
    with pytest.raises(StopIteration):
        coro.send(None)  # completes without ever suspending
    assert gate._held
    exit_coro = gate.__aexit__(None, None, None)
    with pytest.raises(StopIteration):
        exit_coro.send(None)
    assert not gate._held
