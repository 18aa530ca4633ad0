"""The one admission table both sides decide with: chains, FIFO, overtaking, limits."""

from __future__ import annotations

import pytest

from cartridge_runtime.manifest import PoolDeclarations, PoolTable, UnknownPoolError
from cartridge_runtime.protocol._admission import POOL_ALL, PoolAdmission, effective_capacity


def _table(closed: bool = False) -> PoolAdmission[str]:
    table: PoolAdmission[str] = PoolAdmission(closed=closed)
    table.add_pool("cap:a", 1)
    table.add_pool("cap:b", 0)
    table.add_pool("shared", 0, ("cap:a", "cap:b"))
    table.add_pool(POOL_ALL, 0, ("cap:a", "cap:b"))
    return table


def test_a_chain_is_singleton_then_shared_then_all() -> None:
    table = _table()
    assert [p.name for p in table.chain_pools("cap:a")] == ["cap:a", "shared", "all"]
    assert [p.name for p in table.chain_pools("cap:zzz")] == ["all"]


def test_a_closed_table_refuses_a_cap_without_its_own_pool() -> None:
    with pytest.raises(LookupError, match="unknown pool 'cap:zzz'"):
        _table(closed=True).chain_pools("cap:zzz")


def test_requests_wait_in_line_and_go_oldest_first() -> None:
    table = _table()
    assert table.arrive("cap:a", "first") is None
    assert table.arrive("cap:a", "second") == 1
    assert table.arrive("cap:a", "third") == 2
    assert table.admit_next() is None
    table.release("cap:a")
    assert table.admit_next() == ("cap:a", "second")
    assert table.admit_next() is None
    table.release("cap:a")
    assert table.admit_next() == ("cap:a", "third")


def test_a_request_that_fits_overtakes_one_held_back_by_a_full_pool() -> None:
    table = _table()
    table.arrive("cap:a", "running")
    assert table.arrive("cap:a", "held") == 1
    assert table.arrive("cap:b", "free") is None
    assert table.waiting == 1


def test_nobody_goes_ahead_of_a_waiter_that_could_go_now() -> None:
    table = _table()
    table.arrive("cap:a", "running")
    table.arrive("cap:a", "held")
    table.pool("cap:a").set_limits(2, None)
    # The limit rose but nobody asked the line yet: a newcomer must not jump it.
    assert table.arrive("cap:b", "newcomer") == 1
    assert table.admit_next() == ("cap:a", "held")
    assert table.admit_next() == ("cap:b", "newcomer")


def test_limits_are_the_smaller_of_configured_and_available() -> None:
    assert effective_capacity(0, None) == 0
    assert effective_capacity(3, 0) == 3
    assert effective_capacity(0, 2) == 2
    assert effective_capacity(3, 2) == 2
    table = _table()
    table.pool("shared").set_limits(0, 1)
    assert table.arrive("cap:b", "one") is None
    assert table.arrive("cap:b", "two") == 1


def test_a_double_release_is_refused_but_a_chain_release_stops_at_zero() -> None:
    table = _table()
    table.arrive("cap:b", "x")
    table.release("cap:b")
    with pytest.raises(RuntimeError, match="below zero"):
        table.release("cap:b")
    chain = table.chain_pools("cap:b")
    table.release_chain(chain)
    assert all(pool.active == 0 for pool in chain)


def test_queued_requests_can_leave_the_line_one_or_all() -> None:
    table = _table()
    table.arrive("cap:a", "running")
    table.arrive("cap:a", "one")
    table.arrive("cap:a", "two")
    table.arrive("cap:a", "three")
    assert table.remove_queued(lambda item: item == "two") == "two"
    assert table.remove_queued(lambda item: item == "two") is None
    assert table.queued_on(table.pool("cap:a")) == 2
    assert table.clear_line() == ["one", "three"]
    assert table.waiting == 0


def test_the_manifest_table_is_this_table_with_manifest_errors() -> None:
    table: PoolTable[str] = PoolTable(["cap:b", "cap:a"], PoolDeclarations(capacities={"cap:a": 1}))
    assert isinstance(table, PoolAdmission)
    assert table.chain("cap:a") == ["cap:a", "all"]
    with pytest.raises(UnknownPoolError):
        table.arrive("cap:c", "x")


@pytest.mark.parametrize(
    ("running", "waiting", "cap"),
    [
        ((), (), "cap:a"),
        (("cap:a",), (), "cap:a"),
        (("cap:a",), (), "cap:b"),
        (("cap:a",), ("cap:a",), "cap:b"),
        (("cap:b", "cap:b"), ("cap:a",), "cap:b"),
    ],
)
def test_take_admits_exactly_when_arrive_would_and_never_queues(
    running: tuple[str, ...], waiting: tuple[str, ...], cap: str
) -> None:
    def prepared() -> PoolAdmission[str]:
        table = _table()
        table.pool("shared").set_limits(0, 2)
        for name in running:
            assert table.arrive(name, "running") is None
        for name in waiting:
            assert table.arrive(name, "waiting") is not None
        return table

    by_arrive, by_take = prepared(), prepared()
    admitted = by_arrive.arrive(cap, "new") is None
    if not admitted:
        by_arrive.remove_queued(lambda item: item == "new")
    chain = by_take.take(by_take.chain_pools(cap))
    assert (chain is not None) == admitted
    assert chain is None or chain == by_take.chain_pools(cap)
    assert by_take.waiting == by_arrive.waiting == len(waiting)
    assert {n: p.active for n, p in by_take.pools.items()} == {
        n: p.active for n, p in by_arrive.pools.items()
    }
