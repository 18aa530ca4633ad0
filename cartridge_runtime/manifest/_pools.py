"""Concurrency pools: the ``pools`` JSON of HELLO and heartbeat replies (HSK-23 to HSK-25),
and the admission table the runtime keeps (the protocol's
:class:`~cartridge_runtime.protocol._admission.PoolAdmission`, which the engine's gate waits
around too, drawn from the manifest's declarations).

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
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ..protocol import CAPACITY_UNLIMITED, PoolAdmission, effective_capacity
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

T = TypeVar("T")


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


class PoolTable(PoolAdmission[T]):
    """The runtime's pools for one cartridge process: the admission table of
    :class:`~cartridge_runtime.protocol._admission.PoolAdmission` drawn from the
    manifest's declarations, plus operator capacities and the wire JSON. Not
    thread-safe; the owner serializes access (the async runtime is single-threaded).

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

        super().__init__(closed=True)
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
        for name in singles:
            self.add_pool(name, capacities.get(name, CAPACITY_UNLIMITED))
        for name in sorted(declarations.pools):
            members = tuple(resolve(member) for member in declarations.pools[name])
            self.add_pool(name, capacities.get(name, CAPACITY_UNLIMITED), members)
        for key in capacities:
            if key == POOL_ALL or key in self.pools:
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
        self.add_pool(POOL_ALL, capacities.get(POOL_ALL, CAPACITY_UNLIMITED), tuple(singles))

    @classmethod
    def from_manifest(cls, registered_cap_urns: Iterable[str], manifest: Manifest) -> PoolTable[T]:
        """The table for ``manifest``'s pool declarations and these handlers."""
        return cls(registered_cap_urns, manifest.pool_declarations)

    def _unknown(self, name: str) -> Exception:
        return UnknownPoolError(f"unknown pool '{name}'", pool=name)

    # -- introspection ------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Pool names in wire order."""
        return list(self.pools)

    def chain(self, cap: str) -> list[str]:
        """The admission chain of a registered cap (canonical URN text).

        :raises UnknownPoolError: ``cap`` is not a registered handler.
        """
        return [pool.name for pool in self.chain_pools(cap)]

    def effective(self, pool: str) -> int:
        """A pool's effective limit (0 = unlimited).

        :raises UnknownPoolError: no such pool.
        """
        return self.pool(pool).limit

    # -- capacities ---------------------------------------------------------------

    def apply_desired(self, desired: Mapping[str, int]) -> None:
        """Apply an operator's desired ``configured`` values (heartbeat probe).
        The batch is checked first: one unknown pool refuses all of it.

        :raises UnknownPoolError: a name that is not a pool of this table.
        """
        pools = [self.pool(name) for name in desired]
        for pool in pools:
            pool.set_limits(desired[pool.name], pool.available)

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
        entry = self.pool(pool)
        entry.set_limits(entry.configured, available)

    # -- wire ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, PoolState]:
        """Every pool's wire state, in wire order."""
        return {
            name: PoolState(
                declared=pool.declared,
                configured=pool.configured,
                available=pool.available,
                active=pool.active,
                queued=self.queued_on(pool),
                caps=pool.members,
            )
            for name, pool in self.pools.items()
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
