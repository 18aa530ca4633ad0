"""The switch's admission per cartridge pool (RLY-13), the part of its core that counts.

Rules first:

1. A routed REQ takes a slot in each pool of its cap's chain (the cap's singleton pool, each
   shared pool listing it, then ``all``), with each pool's announced capacity (0 =
   unlimited); it waits, in order, while one is full, and a request that waits holds back
   every later one (no overtaking).
2. A cartridge its host announces as not running gets one call at a time through ``all``
   until it answered one; then its waiting requests' capacities are lifted.
3. A request that ends gives its slots back.

:class:`Admission` is a base of :class:`~._switch.SwitchCore`: it holds the counters and the
queue; the core decides when a request is routed, answered or ended.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ._inventory import CartridgeRecord, pool_chain
from ._switch_model import PICKS_KEPT, PoolKey, Route, SwitchAction, ToHost

__all__ = ("Admission",)


class Admission:
    """Pool slots in use, the requests waiting for one, and the cartridges that answered."""

    def __init__(self) -> None:
        self._in_use: dict[PoolKey, int] = {}
        self._waiting: deque[Route] = deque()
        #: (host, record key) of cartridges not announced running that answered a call: the
        #: one-call-at-a-time start-up rule no longer holds them.
        self._answered: set[tuple[str, tuple[Any, ...]]] = set()
        #: Admission chains by (id of record, cap, answered); the record is kept beside its
        #: chain, so an id reused by a later record never finds a stale one.
        self._chains: dict[
            tuple[int, str, bool], tuple[CartridgeRecord, tuple[tuple[str, int], ...]]
        ] = {}
        #: Each chain's pool keys and capacities, by (host, id of the chain) (the chain is
        #: kept beside them, as for ``_chains``).
        self._pools: dict[
            tuple[str, int],
            tuple[tuple[tuple[str, int], ...], tuple[PoolKey, ...], dict[PoolKey, int]],
        ] = {}

    def admitted(self, host: str) -> dict[str, int]:
        """Requests holding each pool of ``host`` now (pool names of every cartridge)."""
        found: dict[str, int] = {}
        for (h, _record, pool), n in self._in_use.items():
            if h == host and n:
                found[pool] = found.get(pool, 0) + n
        return found

    def _chain_of(
        self, record: CartridgeRecord, cap: str, answered: bool
    ) -> tuple[tuple[str, int], ...]:
        """:func:`pool_chain`, kept per record (an inventory's records are immutable and a
        new inventory brings new ones), cap and start-up state: computed once, not per call."""
        key = (id(record), cap, answered)
        kept = self._chains.get(key)
        if kept is not None and kept[0] is record:
            return kept[1]
        chain = pool_chain(record, cap, answered=answered)
        if len(self._chains) >= PICKS_KEPT:
            self._chains.clear()
        self._chains[key] = (record, chain)
        return chain

    def _pools_of(
        self, host: str, key: tuple[Any, ...], chain: tuple[tuple[str, int], ...]
    ) -> tuple[tuple[PoolKey, ...], dict[PoolKey, int]]:
        """The pool keys of a route along ``chain`` and their capacities, kept per chain
        (:meth:`_chain_of` keeps the chains; the capacities are replaced, never changed)."""
        kept = self._pools.get((host, id(chain)))
        if kept is not None and kept[0] is chain:
            return kept[1], kept[2]
        pools = tuple((host, key, name) for name, _cap in chain)
        capacities = {k: c for k, (_name, c) in zip(pools, chain, strict=True)}
        if len(self._pools) >= PICKS_KEPT:
            self._pools.clear()
        self._pools[(host, id(chain))] = (chain, pools, capacities)
        return pools, capacities

    def _first_answer(self, route: Route) -> list[SwitchAction]:
        """A cartridge answered: it runs, so the start-up rule of one call at a time ends."""
        self._answered.add((route.dest, route.record))
        for waiting in self._waiting:
            if waiting.dest == route.dest and waiting.record == route.record:
                waiting.capacities = dict.fromkeys(waiting.capacities, 0)
        return self._admit_waiting()

    def _fits(self, route: Route) -> bool:
        in_use = self._in_use
        for k, c in route.capacities.items():  # noqa: SIM110 (no generator per call)
            if c and in_use.get(k, 0) >= c:
                return False
        return True

    def _take(self, route: Route) -> None:
        for key in route.pools:
            self._in_use[key] = self._in_use.get(key, 0) + 1

    def _admit_waiting(self) -> list[SwitchAction]:
        out: list[SwitchAction] = []
        while self._waiting:
            route = self._waiting[0]
            if not self._fits(route):
                break
            self._waiting.popleft()
            held, route.held = route.held or [], None
            self._take(route)
            out += [ToHost(route.dest, f) for f in held]
        return out

    def _release(self, route: Route) -> None:
        for key in route.pools:
            left = self._in_use.get(key, 0) - 1
            if left > 0:
                self._in_use[key] = left
            else:
                self._in_use.pop(key, None)
