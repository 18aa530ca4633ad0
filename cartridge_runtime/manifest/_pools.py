"""Concurrency pools: the ``pools`` JSON of HELLO and heartbeat replies (HSK-23 to HSK-25),
and the admission table the runtime keeps.

Theory of operation. Every registered handler is a pool of one, named by its
canonical cap URN; the manifest may declare shared pools over some of those
caps; ``all`` contains every cap. A cap's *chain* is its singleton pool, the
shared pools containing it (by name), then ``all``. A request is admitted only
when every pool of its chain has room, and never ahead of a waiter that could
go now; otherwise it waits in one FIFO line. Whenever a slot frees or a limit
changes, the longest-waiting request whose whole chain has room goes next.

Each pool carries ``declared`` (the manifest's number), ``configured`` (the
operator's, from heartbeat ``desired_capacities``; starts at declared) and an
optional self-reported ``available``. The effective limit is
``min(configured, available)`` where 0 or absent means unlimited. ``queued``
counts, for a pool, the waiters whose own singleton it is plus the waiters it
is actually holding back (it is in their chain and full).

The order of pools everywhere (and thus in the JSON) is: singletons in sorted
order of the registered URN text, declared shared pools by name, then ``all``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Generic, TypeVar

import attrs

from ._errors import PoolDeclarationError, UnknownPoolError
from ._manifest import Manifest
from ._pool_declarations import POOL_ALL, PoolDeclarations

__all__ = (
    "CAPACITY_UNLIMITED",
    "PoolState",
    "PoolTable",
    "effective_capacity",
    "initial_pools_json",
    "parse_pools_json",
    "parse_desired_capacities",
)

#: A capacity of 0 means "no limit", never "zero slots".
CAPACITY_UNLIMITED: Final = 0

T = TypeVar("T")


def effective_capacity(configured: int, available: int | None) -> int:
    """``min(configured, available)`` with 0 (and absent ``available``) read as
    unlimited on input and 0 meaning unlimited in the result."""
    if available is None or available == CAPACITY_UNLIMITED:
        return configured
    if configured == CAPACITY_UNLIMITED:
        return available
    return min(configured, available)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PoolState:
    """One pool's numbers as they appear on the wire (a snapshot)."""

    declared: int = 0
    configured: int = 0
    available: int | None = None
    active: int = 0
    queued: int = 0
    #: Member cap URNs; empty for singleton pools (the name is the member).
    caps: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)

    @property
    def effective(self) -> int:
        """The effective admission bound (0 = unlimited)."""
        return effective_capacity(self.configured, self.available)

    def to_json(self) -> dict[str, Any]:
        """``{declared, configured, active, queued, [available], [caps]}``."""
        result: dict[str, Any] = {
            "declared": self.declared,
            "configured": self.configured,
            "active": self.active,
            "queued": self.queued,
        }
        if self.available is not None:
            result["available"] = self.available
        if self.caps:
            result["caps"] = list(self.caps)
        return result


class _Pool:
    """Mutable bookkeeping for one pool inside a :class:`PoolTable`."""

    __slots__ = ("active", "available", "configured", "declared", "members", "name")

    def __init__(self, name: str, declared: int, members: tuple[str, ...] = ()) -> None:
        self.name = name
        self.declared = declared
        self.configured = declared
        self.available: int | None = None
        self.active = 0
        self.members = members

    def has_room(self) -> bool:
        limit = effective_capacity(self.configured, self.available)
        return limit == CAPACITY_UNLIMITED or self.active < limit


@attrs.define
class _Waiter(Generic[T]):
    ticket: int
    cap: str
    chain: tuple[_Pool, ...]
    item: T


class PoolTable(Generic[T]):
    """The runtime's pools for one cartridge process: admission, counters,
    operator capacities and the wire JSON. Not thread-safe; the owner
    serializes access (the async runtime is single-threaded).

    ``T`` is whatever the runtime queues for a waiting request.
    """

    def __init__(
        self,
        registered_cap_urns: Iterable[str],
        declarations: PoolDeclarations | None = None,
    ) -> None:
        """Materialize the pools for the registered handler URNs.

        :raises PoolDeclarationError: a registered URN that does not parse or
            is registered twice, or a declaration naming a cap with no
            registered handler, or a capacity key naming nothing.
        """
        from cartridge_runtime.urn import CapUrn, UrnError

        declarations = declarations or PoolDeclarations()
        singles: list[str] = []
        for raw in sorted(registered_cap_urns):
            try:
                canon = str(CapUrn.parse(raw))
            except UrnError as exc:
                raise PoolDeclarationError(
                    f"registered handler URN {raw!r} is not a valid cap URN: {exc}", pool=raw
                ) from exc
            if canon in singles:
                raise PoolDeclarationError(f"handler {canon!r} is registered twice", pool=canon)
            singles.append(canon)

        def resolve(member: str) -> str:
            try:
                canon = str(CapUrn.parse(member))
            except UrnError as exc:
                raise PoolDeclarationError(
                    f"pool declaration cap {member!r} is not a valid cap URN: {exc}",
                    pool=member,
                ) from exc
            if canon not in singles:
                raise PoolDeclarationError(
                    f"pool declaration names cap {canon!r} but no handler is registered under it",
                    pool=member,
                )
            return canon

        capacities = declarations.capacities
        self._pools: dict[str, _Pool] = {}
        for name in singles:
            self._pools[name] = _Pool(name, capacities.get(name, CAPACITY_UNLIMITED))
        shared: list[tuple[str, tuple[str, ...]]] = []
        for name in sorted(declarations.pools):
            members = tuple(resolve(member) for member in declarations.pools[name])
            self._pools[name] = _Pool(name, capacities.get(name, CAPACITY_UNLIMITED), members)
            shared.append((name, members))
        for key in capacities:
            if key == POOL_ALL or key in self._pools:
                continue
            try:
                if str(CapUrn.parse(key)) in singles:
                    continue
            except UrnError:
                pass
            raise PoolDeclarationError(
                f"declared capacity for {key!r} names neither a registered cap, a declared "
                f"pool, nor {POOL_ALL!r}",
                pool=key,
            )
        self._pools[POOL_ALL] = _Pool(
            POOL_ALL, capacities.get(POOL_ALL, CAPACITY_UNLIMITED), tuple(singles)
        )
        all_pool = self._pools[POOL_ALL]
        self._chains: dict[str, tuple[_Pool, ...]] = {
            cap: (
                self._pools[cap],
                *(self._pools[name] for name, members in shared if cap in members),
                all_pool,
            )
            for cap in singles
        }
        self._line: list[_Waiter[T]] = []
        self._next_ticket = 1

    @classmethod
    def from_manifest(cls, registered_cap_urns: Iterable[str], manifest: Manifest) -> PoolTable[T]:
        """The table for ``manifest``'s pool declarations and these handlers."""
        return cls(registered_cap_urns, manifest.pool_declarations)

    # -- introspection ------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Pool names in wire order."""
        return list(self._pools)

    def chain(self, cap: str) -> list[str]:
        """The admission chain of a registered cap (canonical URN text).

        :raises UnknownPoolError: ``cap`` is not a registered handler.
        """
        return [pool.name for pool in self._chain(cap)]

    def _chain(self, cap: str) -> tuple[_Pool, ...]:
        try:
            return self._chains[cap]
        except KeyError:
            raise UnknownPoolError(f"unknown pool '{cap}'", pool=cap) from None

    def _pool(self, name: str) -> _Pool:
        try:
            return self._pools[name]
        except KeyError:
            raise UnknownPoolError(f"unknown pool '{name}'", pool=name) from None

    def effective(self, pool: str) -> int:
        """A pool's effective limit (0 = unlimited)."""
        entry = self._pool(pool)
        return effective_capacity(entry.configured, entry.available)

    def has_room(self, cap: str) -> bool:
        """Whether every pool of ``cap``'s chain has a free slot."""
        return all(pool.has_room() for pool in self._chain(cap))

    @property
    def waiting(self) -> int:
        """How many requests are in line."""
        return len(self._line)

    # -- admission ----------------------------------------------------------------

    def arrive(self, cap: str, item: T) -> int | None:
        """A request for ``cap`` arrives. Returns ``None`` when it is admitted
        at once (a slot is taken in every pool of its chain), else its
        position (from 1) among the requests waiting on the same cap; ``item``
        is then held until :meth:`admit_next` returns it.

        :raises UnknownPoolError: ``cap`` is not a registered handler.
        """
        chain = self._chain(cap)
        line = self._line
        # (Loops, not any()/all() over generators: this runs for every request.)
        line_can_go = False
        for waiter in line:
            for p in waiter.chain:
                if not p.has_room():
                    break
            else:
                line_can_go = True
                break
        if not line_can_go:
            for pool in chain:
                if not pool.has_room():
                    break
            else:
                for pool in chain:
                    pool.active += 1
                return None
        self._line.append(_Waiter(self._next_ticket, cap, chain, item))
        self._next_ticket += 1
        return sum(1 for waiter in self._line if waiter.cap == cap)

    def release(self, cap: str) -> None:
        """One admitted request of ``cap`` finished: free its slots.

        :raises UnknownPoolError: ``cap`` is not a registered handler.
        :raises RuntimeError: a pool would go below zero active (a double release).
        """
        chain = self._chain(cap)
        for pool in chain:
            if pool.active == 0:
                raise RuntimeError(f"pool {pool.name!r} released below zero active")
        for pool in chain:
            pool.active -= 1

    def admit_next(self) -> tuple[str, T] | None:
        """Admit the longest-waiting request whose whole chain has room and
        return ``(cap, item)``; ``None`` when nobody in line can go. Call it
        repeatedly after a release or a limit change."""
        if not self._line:
            return None
        for index, waiter in enumerate(self._line):
            if all(pool.has_room() for pool in waiter.chain):
                del self._line[index]
                for pool in waiter.chain:
                    pool.active += 1
                return waiter.cap, waiter.item
        return None

    def remove_queued(self, matches: Callable[[T], bool]) -> T | None:
        """Take the first waiting request whose item ``matches`` out of line
        (a cancel before its handler started); it held no slots. Returns the
        item, or ``None``."""
        for index, waiter in enumerate(self._line):
            if matches(waiter.item):
                del self._line[index]
                return waiter.item
        return None

    # -- capacities ---------------------------------------------------------------

    def apply_desired(self, desired: Mapping[str, int]) -> None:
        """Apply an operator's desired ``configured`` values (heartbeat probe).
        The batch is checked first: one unknown pool refuses all of it.

        :raises UnknownPoolError: a name that is not a pool of this table.
        """
        for name in desired:
            if name not in self._pools:
                raise UnknownPoolError(f"unknown pool '{name}'", pool=name)
        for name in sorted(desired):
            self._pools[name].configured = desired[name]

    def apply_desired_json(self, data: bytes | str) -> None:
        """:meth:`apply_desired` for the raw ``desired_capacities`` meta value.

        :raises UnknownPoolError: malformed JSON or an unknown pool (the
            reference answers both with ERR ``UNKNOWN_POOL``).
        """
        self.apply_desired(parse_desired_capacities(data))

    def set_available(self, pool: str, available: int | None) -> None:
        """The cartridge's self-report for one pool (``None`` clears it).

        :raises UnknownPoolError: no such pool.
        """
        self._pool(pool).available = available

    # -- wire ---------------------------------------------------------------------

    def _queued(self, pool: _Pool) -> int:
        room = pool.has_room()
        count = 0
        for waiter in self._line:
            if waiter.chain[0] is pool or (not room and pool in waiter.chain):
                count += 1
        return count

    def snapshot(self) -> dict[str, PoolState]:
        """Every pool's wire state, in wire order."""
        return {
            name: PoolState(
                declared=pool.declared,
                configured=pool.configured,
                available=pool.available,
                active=pool.active,
                queued=self._queued(pool),
                caps=pool.members,
            )
            for name, pool in self._pools.items()
        }

    def to_json(self) -> dict[str, Any]:
        """The pools JSON object."""
        return {name: state.to_json() for name, state in self.snapshot().items()}

    def to_json_bytes(self) -> bytes:
        """The bytes of HELLO's / a heartbeat reply's ``meta.pools``."""
        return json.dumps(self.to_json()).encode("utf-8")


def initial_pools_json(registered_cap_urns: Iterable[str], manifest: Manifest) -> bytes:
    """The ``pools`` bytes a cartridge's HELLO carries: every pool at rest.

    :raises PoolDeclarationError: the declarations do not resolve against the
        registered handlers.
    """
    table: PoolTable[object] = PoolTable(registered_cap_urns, manifest.pool_declarations)
    return table.to_json_bytes()


def parse_desired_capacities(data: bytes | str) -> dict[str, int]:
    """Read a heartbeat's ``desired_capacities`` JSON (pool name to int).

    :raises UnknownPoolError: not a JSON object of non-negative integers.
    """
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnknownPoolError(f"malformed desired-capacities map: {exc}") from exc
    if not isinstance(raw, dict):
        raise UnknownPoolError("malformed desired-capacities map: not a JSON object")
    result: dict[str, int] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UnknownPoolError(
                f"malformed desired-capacities map: {name!r} is not a non-negative integer",
                pool=name,
            )
        result[name] = value
    return result


def _int(obj: Mapping[str, Any], key: str, name: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PoolDeclarationError(
            f"malformed pool-state map: pool {name!r} field {key!r} is not an integer",
            pool=name,
        )
    return value


def parse_pools_json(data: bytes | str) -> dict[str, PoolState]:
    """Read a ``pools`` map (HELLO or heartbeat reply), as a host does.

    :raises PoolDeclarationError: malformed JSON or a pool state missing a number.
    """
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PoolDeclarationError(f"malformed pool-state map: {exc}") from exc
    if not isinstance(raw, dict):
        raise PoolDeclarationError("malformed pool-state map: not a JSON object")
    states: dict[str, PoolState] = {}
    for name, state in raw.items():
        if not isinstance(state, dict):
            raise PoolDeclarationError(
                f"malformed pool-state map: pool {name!r} is not an object", pool=name
            )
        available = state.get("available")
        caps = state.get("caps") or []
        if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
            raise PoolDeclarationError(
                f"malformed pool-state map: pool {name!r} caps is not a list of strings",
                pool=name,
            )
        states[name] = PoolState(
            declared=_int(state, "declared", name),
            configured=_int(state, "configured", name),
            available=None if available is None else _int(state, "available", name),
            active=_int(state, "active", name),
            queued=_int(state, "queued", name),
            caps=caps,
        )
    return states
