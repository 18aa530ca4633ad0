"""Pool admission: which request may start now under a cartridge's pool capacities.

1. A request holds one slot in every pool of its chain, taken all at once when it is
   admitted and given back all at once when it ends.
2. A request never starts ahead of a waiting one that could start now: the line is FIFO
   among the requests that fit.
3. Nothing here waits or reads a clock; callers ask, then wait or start.

Theory of operation. A pool has a limit (0 means unlimited) and a count of active requests.
A cap's *chain* is its own singleton pool (named by the cap), then every shared pool listing
the cap as a member (in table order), then ``all``. :meth:`PoolAdmission.arrive` admits a
request at once when nobody in line could go and its whole chain has room; otherwise it joins
the line. Whenever a slot frees or a limit changes, :meth:`PoolAdmission.admit_next` hands out
the longest-waiting request whose chain has room, one per call.

Both sides of the wire decide with this one table: the cartridge admits REQs by its own
declared pools (``manifest.PoolTable`` builds on it), the engine holds calls back by the pools
a cartridge announced (its gate waits around it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

__all__ = ("CAPACITY_UNLIMITED", "POOL_ALL", "Pool", "PoolAdmission", "effective_capacity")

#: A capacity of 0 means "no limit", never "zero slots".
CAPACITY_UNLIMITED: Final = 0

#: The reserved pool that contains every cap.
POOL_ALL: Final = "all"

T = TypeVar("T")


def effective_capacity(configured: int, available: int | None) -> int:
    """``min(configured, available)`` with 0 (and absent ``available``) read as
    unlimited on input and 0 meaning unlimited in the result."""
    if available is None or available == CAPACITY_UNLIMITED:
        return configured
    if configured == CAPACITY_UNLIMITED:
        return available
    return min(configured, available)


class Pool:
    """One pool's numbers inside a :class:`PoolAdmission` (mutable bookkeeping).

    ``limit`` is the effective bound, kept in step with ``configured`` and
    ``available`` by :meth:`set_limits`.
    """

    __slots__ = ("active", "available", "configured", "declared", "limit", "members", "name")

    def __init__(self, name: str, declared: int, members: tuple[str, ...] = ()) -> None:
        self.name = name
        self.declared = declared
        self.configured = declared
        self.available: int | None = None
        self.limit = declared
        self.active = 0
        #: Member cap URNs; empty for a singleton pool (its name is the member).
        self.members = members

    def set_limits(self, configured: int, available: int | None) -> None:
        """New operator and self-reported numbers; the effective limit follows."""
        self.configured = configured
        self.available = available
        self.limit = effective_capacity(configured, available)

    def has_room(self) -> bool:
        """Whether one more request fits."""
        return self.limit == CAPACITY_UNLIMITED or self.active < self.limit


class _Waiter(Generic[T]):
    __slots__ = ("cap", "chain", "item")

    def __init__(self, cap: str, chain: tuple[Pool, ...], item: T) -> None:
        self.cap = cap
        self.chain = chain
        self.item = item


def _fits(chain: tuple[Pool, ...]) -> bool:
    # (A loop, not all() over a generator: this runs for every request.)
    for pool in chain:  # noqa: SIM110
        if not (pool.limit == CAPACITY_UNLIMITED or pool.active < pool.limit):
            return False
    return True


class PoolAdmission(Generic[T]):
    """Pools, the chains of caps through them, and one FIFO line of waiting requests.

    ``T`` is whatever the caller queues for a waiting request. A *closed* table knows every
    cap it admits (a cap with no singleton pool is unknown); an open one admits any cap
    through the shared pools naming it and ``all``. Not thread-safe: the owner serializes
    access.
    """

    def __init__(self, *, closed: bool = False) -> None:
        self._pools: dict[str, Pool] = {}
        self._chains: dict[str, tuple[Pool, ...]] = {}
        self._line: list[_Waiter[T]] = []
        self._closed = closed

    # -- pools ----------------------------------------------------------------------

    def add_pool(self, name: str, declared: int, members: tuple[str, ...] = ()) -> Pool:
        """Add a pool (or return the one of that name, members updated); chains are redrawn."""
        pool = self._pools.get(name)
        if pool is None:
            pool = self._pools[name] = Pool(name, declared, members)
        else:
            pool.members = members
        self._chains.clear()
        return pool

    @property
    def pools(self) -> dict[str, Pool]:
        """Every pool by name, in table order (the caller must not add or remove)."""
        return self._pools

    def pool(self, name: str) -> Pool:
        """One pool by name.

        :raises LookupError: no such pool (a subclass may raise its own kind).
        """
        try:
            return self._pools[name]
        except KeyError:
            raise self._unknown(name) from None

    def _unknown(self, name: str) -> Exception:
        """The error for a name that is not a pool or not an admitted cap."""
        return LookupError(f"unknown pool '{name}'")

    def chain_pools(self, cap: str) -> tuple[Pool, ...]:
        """The pools a request for ``cap`` holds a slot in, in order.

        :raises LookupError: a closed table has no singleton pool for ``cap``.
        """
        chain = self._chains.get(cap)
        if chain is None:
            chain = self._chains[cap] = self._draw_chain(cap)
        return chain

    def _draw_chain(self, cap: str) -> tuple[Pool, ...]:
        single = self._pools.get(cap)
        if single is not None and single.members:
            single = None
        if single is None and self._closed:
            raise self._unknown(cap)
        parts = [] if single is None else [single]
        everyone = None
        for name, pool in self._pools.items():
            if name == POOL_ALL:
                everyone = pool
            elif pool.members and cap in pool.members:
                parts.append(pool)
        if everyone is not None:
            parts.append(everyone)
        return tuple(parts)

    # -- admission ------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """How many requests are in line."""
        return len(self._line)

    def has_room(self, cap: str) -> bool:
        """Whether every pool of ``cap``'s chain has a free slot.

        :raises LookupError: as :meth:`chain_pools`.
        """
        return _fits(self.chain_pools(cap))

    def arrive(self, cap: str, item: T) -> int | None:
        """A request for ``cap`` arrives. Returns ``None`` when it is admitted at once (a
        slot is taken in every pool of its chain), else its position (from 1) among the
        requests waiting on the same cap; ``item`` is then held until :meth:`admit_next`
        returns it.

        :raises LookupError: as :meth:`chain_pools`.
        """
        chain = self.chain_pools(cap)
        line = self._line
        if (not line or not any(_fits(waiter.chain) for waiter in line)) and _fits(chain):
            for pool in chain:
                pool.active += 1
            return None
        line.append(_Waiter(cap, chain, item))
        return sum(1 for waiter in line if waiter.cap == cap)

    def take(self, chain: tuple[Pool, ...]) -> tuple[Pool, ...] | None:
        """:meth:`arrive` for a caller that will not wait: a slot in every pool of
        ``chain`` (one :meth:`chain_pools` gave since the table last changed) taken and
        ``chain`` returned when :meth:`arrive` would admit at once; else ``None``, nothing
        taken and nobody added to the line."""
        line = self._line
        if line and any(_fits(waiter.chain) for waiter in line):
            return None
        for pool in chain:
            if pool.limit and pool.active >= pool.limit:  # 0: unlimited
                return None
        for pool in chain:
            pool.active += 1
        return chain

    def admit_next(self) -> tuple[str, T] | None:
        """Admit the longest-waiting request whose whole chain has room and return
        ``(cap, item)``; ``None`` when nobody in line can go. Call it repeatedly after a
        release or a limit change."""
        for index, waiter in enumerate(self._line):
            if _fits(waiter.chain):
                del self._line[index]
                for pool in waiter.chain:
                    pool.active += 1
                return waiter.cap, waiter.item
        return None

    def release(self, cap: str) -> None:
        """One admitted request of ``cap`` finished: free its slots.

        :raises LookupError: as :meth:`chain_pools`.
        :raises RuntimeError: a pool would go below zero active (a double release).
        """
        chain = self.chain_pools(cap)
        for pool in chain:
            if pool.active == 0:
                raise RuntimeError(f"pool {pool.name!r} released below zero active")
        for pool in chain:
            pool.active -= 1

    def release_chain(self, chain: tuple[Pool, ...]) -> bool:
        """Free the slots of a chain taken earlier, even if the table's chains were redrawn
        since; a pool already at zero stays there. Returns whether anybody waits in line
        (then :meth:`admit_next` may hand one out)."""
        for pool in chain:
            if pool.active > 0:
                pool.active -= 1
        return bool(self._line)

    def remove_queued(self, matches: Callable[[T], bool]) -> T | None:
        """Take the first waiting request whose item ``matches`` out of line (a cancel
        before it started); it held no slots. Returns the item, or ``None``."""
        for index, waiter in enumerate(self._line):
            if matches(waiter.item):
                del self._line[index]
                return waiter.item
        return None

    def clear_line(self) -> list[T]:
        """Empty the line (the peer is gone) and return the waiting items, oldest first."""
        line, self._line = self._line, []
        return [waiter.item for waiter in line]

    def queued_on(self, pool: Pool) -> int:
        """Waiters whose own singleton is ``pool``, plus those ``pool`` holds back (it is in
        their chain and full)."""
        room = pool.has_room()
        count = 0
        for waiter in self._line:
            if waiter.chain[0] is pool or (not room and pool in waiter.chain):
                count += 1
        return count
