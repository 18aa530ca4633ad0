"""Handler workers: the wake-up of idle ones on asyncio (a bare future instead of an event),
and the cancel scope a worker keeps across requests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _runtime_cartridge import ECHO, SLOW, build_runtime

from cartridge_runtime.protocol import FrameType, MessageId, frames
from cartridge_runtime.runtime._frames._handlers import _FutureWake
from cartridge_runtime.testing import CartridgeHarness


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


@pytest.mark.asyncio
async def test_a_cancel_ends_only_its_request_and_workers_serve_on_after_it() -> None:
    # A worker serves requests in one cancel scope until one of them is cancelled: the cancel
    # must reach that request's handler only, and the worker must serve the next ones.
    async with CartridgeHarness(build_runtime()) as h:
        for _ in range(3):
            for word in (b"a", b"b", b"c"):  # warm workers serve several requests each
                assert (await h.call(ECHO, [("media:", word)])).main_bytes == word
            rid1, call1 = await _start_slow(h)
            rid2, call2 = await _start_slow(h)
            await h.send_frame(frames.cancel(rid1))
            assert (await h.result(call1)).error.code == "CANCELLED"
            assert (await h.call(ECHO, [("media:", b"alive")])).main_bytes == b"alive"
            assert not [f for f in h.received if f.id == rid2 and f.frame_type is FrameType.ERR]
            await h.send_frame(frames.cancel(rid2))
            assert (await h.result(call2)).error.code == "CANCELLED"


async def _start_slow(h: CartridgeHarness) -> tuple[MessageId, Any]:
    rid = MessageId.new()
    call = await h.start_call(SLOW, [("media:", b"")], rid=rid)
    await h.wait_for(
        lambda f: (
            f.id == rid and f.frame_type is FrameType.LOG and f.meta.get("message") == "started"
        )
    )
    return rid, call
