"""Routing by cap URN: which cartridge (and which of its handler caps) serves a cap.

Every cartridge contributes its caps in the order it was added (its manifest's caps once it
has started, ``known_caps`` before that). A cap is resolved with the runtime's own dispatch
(:func:`cartridge_runtime.urn.select_handler`) over that list with duplicates removed: an
exact string match first, then the best dispatchable cap (refinements first, then the
smallest specificity distance). **Ties go to the cartridge added first**; a cap text that
several cartridges declare belongs to the first of them. When nothing matches and some
cartridges have not told their caps yet (no ``known_caps`` and never started), they are
started, in the order added, until one matches.

The :class:`CapRouter` is also where peer calls go (it is the
:class:`~._peer.PeerRouter` of the engine's peer links).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..urn import select_handler
from ._connection._counters import Counters
from ._errors import NoRoute, SpawnFailed
from ._peer import PeerEnd
from ._replica_start import ReplicaStarter
from ._replicas import CartridgeSlot

__all__ = ("CapRouter", "Route")

#: Most distinct cap texts whose routing result is remembered.
_ROUTE_CACHE = 1024

#: Where a cap goes: the cartridge and its handler cap.
Route = tuple[CartridgeSlot, str]


class CapRouter:
    """Routing over the engine's cartridges (see the module docstring).

    :param slots: the engine's cartridges by name, in the order added (read, never changed).
    :param starter: starts cartridges whose caps are unknown, and picks a replica.
    :param counters: counts calls that found no route.
    """

    def __init__(
        self, slots: Mapping[str, CartridgeSlot], starter: ReplicaStarter, counters: Counters
    ) -> None:
        self._slots = slots
        self._starter = starter
        self._counters = counters
        #: Routing results by the exact cap text asked for; cleared when caps change.
        self.cache: dict[str, Route] = {}

    def _table(self) -> tuple[list[str], list[Route]]:
        texts: list[str] = []
        owners: list[Route] = []
        seen: set[str] = set()
        for slot in self._slots.values():
            for cap in slot.caps or ():
                if cap not in seen:
                    seen.add(cap)
                    texts.append(cap)
                    owners.append((slot, cap))
        return texts, owners

    def lookup(self, cap: str) -> Route | None:
        """Where ``cap`` goes by the caps known now (``None``: nobody known serves it)."""
        hit = self.cache.get(cap)
        if hit is not None:
            return hit
        texts, owners = self._table()
        index = select_handler(texts, cap)
        if index is None:
            return None
        if len(self.cache) >= _ROUTE_CACHE:
            self.cache.clear()
        hit = self.cache[cap] = owners[index]
        return hit

    def changed(self) -> None:
        """The routing table changed (a cartridge added, or its manifest became known)."""
        self.cache.clear()

    async def resolve(self, cap: str) -> Route:
        """The cartridge (and its handler cap) that serves ``cap``; may start cartridges whose
        caps are still unknown.

        :raises NoRoute: nobody provides it.
        :raises SpawnFailed: nobody else provides it and a cartridge that might failed to start.
        """
        hit = self.lookup(cap)
        if hit is not None:
            return hit
        failures: list[SpawnFailed] = []
        for slot in list(self._slots.values()):
            if slot.caps is None:
                try:
                    await self._starter.connection(slot)
                except SpawnFailed as exc:
                    failures.append(exc)
                    continue
                hit = self.lookup(cap)
                if hit is not None:
                    return hit
        self._counters.no_route += 1
        if failures and len(self._slots) == len(failures):
            raise failures[0]
        known = ", ".join(self._slots) or "none"
        message = f"no cartridge handles cap: {cap} (cartridges: {known})"
        if failures:
            message += "; failed to start: " + "; ".join(
                f.message.splitlines()[0] for f in failures
            )
        raise NoRoute(message)

    def ready_target(self, cap: str) -> tuple[PeerEnd, str] | None:
        """Where a peer call to ``cap`` goes when that is known without waiting: the one
        running instance of the cartridge that serves it, ready (else ``None``:
        :meth:`peer_target`)."""
        hit = self.lookup(cap)
        if hit is None:
            return None
        slot, handler = hit
        single = slot.single
        conn = single.conn if single is not None else None
        if conn is None or not conn.ready:
            return None
        return conn, handler

    async def peer_target(self, cap: str) -> tuple[PeerEnd, str]:
        """Where a peer call to ``cap`` goes: a ready connection and its handler cap.

        :raises CallError: no route, or the target cannot start.
        """
        slot, handler = await self.resolve(cap)
        return await self._starter.connection(slot), handler
