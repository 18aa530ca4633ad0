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
