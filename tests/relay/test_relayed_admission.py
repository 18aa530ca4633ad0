"""A request from the switch joins a running cartridge at once when its pools admit it (no
task per request), and waits its turn when they do not: the gate's non-waiting admission."""

from __future__ import annotations

import anyio
import pytest

from cartridge_runtime.engine._connection._gate import PoolGate

ECHO = "cap:op=echo"


def test_try_acquire_takes_a_free_slot_and_takes_nothing_when_none_is_free() -> None:
    gate = PoolGate({"all": {"configured": 1, "caps": [ECHO]}})
    chain = gate.try_acquire(ECHO)
    assert chain is not None and gate.active == 1
    assert gate.try_acquire(ECHO) is None
    assert gate.active == 1 and gate.queued == 0  # nothing taken, nobody left in line
    gate.release(chain)
    assert gate.active == 0
    assert gate.try_acquire(ECHO) is not None


@pytest.mark.asyncio
async def test_try_acquire_never_jumps_the_line() -> None:
    gate = PoolGate({"all": {"configured": 1, "caps": [ECHO]}})
    first = gate.try_acquire(ECHO)
    assert first is not None
    admitted: list[str] = []

    async def wait_in_line() -> None:
        chain = await gate.acquire(ECHO)
        admitted.append("waiter")
        gate.release(chain)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_in_line)
        await anyio.sleep(0.05)
        assert gate.queued == 1
        assert gate.try_acquire(ECHO) is None  # someone waits ahead
        assert gate.queued == 1
        gate.release(first)
    assert admitted == ["waiter"]


@pytest.mark.asyncio
async def test_an_aborted_gate_admits_nothing_at_once() -> None:
    gate = PoolGate({"all": {"configured": 0, "caps": [ECHO]}})
    gate.abort(RuntimeError("gone"))
    assert gate.try_acquire(ECHO) is None


def test_try_acquire_follows_a_new_pools_map() -> None:
    # The gate keeps each cap's chain between calls; a new map (a heartbeat) redraws it.
    gate = PoolGate({"all": {"configured": 0, "caps": [ECHO]}})
    chain = gate.try_acquire(ECHO)
    assert chain is not None and [pool.name for pool in chain] == ["all"]
    gate.update({ECHO: {"configured": 1}, "all": {"configured": 0, "caps": [ECHO]}})
    second = gate.try_acquire(ECHO)
    assert second is not None and [pool.name for pool in second] == [ECHO, "all"]
    assert gate.try_acquire(ECHO) is None  # the cap's own pool of one is full
    gate.release(second)
    gate.release(chain)
    assert gate.snapshot() == {ECHO: {"limit": 1, "active": 0}, "all": {"limit": 0, "active": 0}}
