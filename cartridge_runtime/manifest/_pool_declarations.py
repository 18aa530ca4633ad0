"""A manifest's pool declarations: shared pools of caps and their declared capacities.

Read and written here (shape only); :func:`validate_pool_declarations` checks them against the
manifest's caps and canonicalizes them, and :mod:`._pools` turns them into the runtime's pool
table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from ._parse import as_list, as_object, fail, join

__all__ = ("POOL_ALL", "PoolDeclarations")

#: The reserved pool that contains every cap.
POOL_ALL: Final = "all"


def _pools(value: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    return {name: tuple(members) for name, members in (value or {}).items()}


def _capacities(value: Mapping[str, int] | None) -> dict[str, int]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class PoolDeclarations:
    """Shared pools (name to member cap URNs) and declared capacities (pool
    name, cap URN or ``all`` to an int; 0 means unlimited)."""

    pools: dict[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_pools, hash=False)
    capacities: dict[str, int] = attrs.field(factory=dict, converter=_capacities, hash=False)

    @property
    def is_empty(self) -> bool:
        """Nothing declared (then ``pool_declarations`` is left out of the JSON)."""
        return not self.pools and not self.capacities

    def to_json(self) -> dict[str, Any]:
        """``{["pools"], ["capacities"]}``, each written only when non-empty."""
        result: dict[str, Any] = {}
        if self.pools:
            result["pools"] = {name: list(members) for name, members in self.pools.items()}
        if self.capacities:
            result["capacities"] = dict(self.capacities)
        return result

    @classmethod
    def from_json(cls, data: Any, path: str = "pool_declarations") -> PoolDeclarations:
        """Read the declarations object (shape only; see ``validate_pool_declarations``).

        :raises ManifestParseError: a non-object, non-list member list, or a
            capacity that is not a non-negative integer.
        """
        obj = as_object(data, path)
        pools: dict[str, list[str]] = {}
        raw_pools = as_object(obj.get("pools") or {}, join(path, "pools"))
        for name, members in raw_pools.items():
            member_path = join(join(path, "pools"), name)
            items = as_list(members, member_path)
            for index, item in enumerate(items):
                if not isinstance(item, str):
                    fail("a pool member is a cap URN string", join(member_path, index))
            pools[name] = items
        capacities: dict[str, int] = {}
        raw_caps = as_object(obj.get("capacities") or {}, join(path, "capacities"))
        for key, value in raw_caps.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                fail(
                    f"a capacity is a non-negative integer, not {value!r}",
                    join(join(path, "capacities"), key),
                )
            capacities[key] = value
        return cls(pools=pools, capacities=capacities)
