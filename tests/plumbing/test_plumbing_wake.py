"""The one-shot wake-up a waiting task sleeps on (``wake_factory``), on both backends."""

from __future__ import annotations

import anyio
import pytest

from cartridge_runtime._plumbing import wake_factory


async def _scenario() -> list[str]:
    seen: list[str] = []
    new_wake = wake_factory()

    # Set before the wait: the wait returns at once.
    early = new_wake()
    early.set()
    early.set()  # a second set is harmless
    await early.wait()
    seen.append("early")

    # Set by another task while one waits.
    wake = new_wake()

    async def waiter() -> None:
        await wake.wait()
        seen.append("woken")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.01)
        assert seen == ["early"]
        wake.set()

    # A wait cancelled by its scope; setting it afterwards does nothing.
    late = new_wake()
    with anyio.move_on_after(0.01) as scope:
        await late.wait()
    assert scope.cancelled_caught
    late.set()
    seen.append("cancelled")
    return seen


@pytest.mark.asyncio
async def test_a_wake_wakes_its_waiter_once_on_asyncio() -> None:
    # On asyncio it is a bare future, not anyio's event.
    assert wake_factory() is not type(anyio.Event())
    assert await _scenario() == ["early", "woken", "cancelled"]


def test_a_wake_wakes_its_waiter_once_on_trio() -> None:
    assert anyio.run(_scenario, backend="trio") == ["early", "woken", "cancelled"]
