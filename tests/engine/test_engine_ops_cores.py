"""The sans-IO parts of supervision, without time passing: the idle judge and the event hub."""

from __future__ import annotations

import anyio
import pytest

from cartridge_runtime.engine import CartridgeAdded, CartridgeRemoved
from cartridge_runtime.engine._supervision._idle import IdleRecord, judge_idle
from cartridge_runtime.engine._supervision._lifecycle import EventHub


def test_an_instance_stops_after_the_timeout_without_calls() -> None:
    record = IdleRecord(served=3, since=10.0)
    record, stop = judge_idle(record, served=3, busy=False, now=10.9, timeout=1.0)
    assert not stop
    _, stop = judge_idle(record, served=3, busy=False, now=11.0, timeout=1.0)
    assert stop


def test_a_call_or_work_in_flight_resets_the_idle_clock() -> None:
    record = IdleRecord(served=3, since=10.0)
    record, stop = judge_idle(record, served=4, busy=False, now=10.9, timeout=1.0)
    assert not stop and record == IdleRecord(served=4, since=10.9)
    record, stop = judge_idle(record, served=4, busy=True, now=12.0, timeout=1.0)
    assert not stop and record.since == 12.0
    _, stop = judge_idle(record, served=4, busy=False, now=13.0, timeout=1.0)
    assert stop


def test_a_subscriber_that_falls_behind_loses_the_newest_events_counted() -> None:
    hub = EventHub()
    assert not hub.active
    sub = hub.subscribe(buffer=2)
    assert hub.active
    for i in range(5):
        hub.emit(CartridgeAdded(cartridge=f"c{i}", caps=(), at=float(i)))
    assert [e.cartridge for e in sub.pending()] == ["c0", "c1"]
    assert sub.dropped == 3
    sub.close()
    assert not hub.active
    hub.emit(CartridgeRemoved(cartridge="c0", at=9.0))
    assert sub.pending() == []
    with pytest.raises(ValueError, match="buffer must be a whole number"):
        hub.subscribe(buffer=0)


def test_a_subscription_iterates_until_closed() -> None:
    async def main() -> None:
        hub = EventHub()
        async with hub.subscribe() as sub:
            hub.emit(CartridgeRemoved(cartridge="x", at=1.0))
            sub.close()
            assert [e async for e in sub] == [CartridgeRemoved(cartridge="x", at=1.0)]
        assert not hub.active

    anyio.run(main)


def test_the_watchdog_acts_on_the_now_it_is_given() -> None:
    import importlib.util
    from pathlib import Path

    from cartridge_runtime.engine import Engine

    path = Path(__file__).with_name("ops_cartridge.py")
    spec = importlib.util.spec_from_file_location("ops_cartridge", path)
    assert spec is not None and spec.loader is not None
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)

    async def main() -> None:
        # Limits of an hour: the watchdog's own timer never fires during the test.
        async with Engine(heartbeat_interval=None, activity_timeout=3600) as engine:
            name = engine.add_cartridge(ops.build_runtime(), idle_timeout=3600)
            await engine.call(ops.ECHO, [(ops.TEXT, b"x")])
            watchdog = engine._watchdog
            now = anyio.current_time()
            assert watchdog.tick(now + 10) <= now + 10 + 900  # the next look: a quarter on
            assert engine.status()[0].state == "running"
            watchdog.tick(now + 10 + 3600)  # an hour without a call, by its clock
            with anyio.fail_after(10):
                while engine.status()[0].state != "idle":  # noqa: ASYNC110 - engine state
                    await anyio.sleep(0.01)
            assert engine.status()[0].name == name

    anyio.run(main)
