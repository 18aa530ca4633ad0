"""The wake-up of idle handler workers on asyncio (a bare future instead of an event)."""

from __future__ import annotations

import asyncio

import pytest

from cartridge_runtime.runtime._frames._handlers import _FutureWake


@pytest.mark.asyncio
async def test_a_wake_releases_its_waiter_once_set_and_tolerates_a_second_set() -> None:
    wake = _FutureWake()
    woken = asyncio.ensure_future(wake.wait())
    await asyncio.sleep(0)
    assert not woken.done()  # waits until set
    wake.set()
    wake.set()  # harmless
    await asyncio.wait_for(woken, 1)


@pytest.mark.asyncio
async def test_setting_a_wake_whose_waiter_was_cancelled_does_nothing() -> None:
    wake = _FutureWake()
    waiter = asyncio.ensure_future(wake.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    wake.set()  # the session may pop a worker that shutdown cancelled: no error
