"""Engine-side admission: honour a cartridge's declared pool capacities with a FIFO line.

A cartridge announces its pools in HELLO (and again in each heartbeat reply): one singleton
pool per handler cap, optional shared pools listing member caps, and ``all``. A call for a
handler cap needs a free slot in every pool of its chain (singleton, shared pools holding it,
``all``); capacity 0 means unlimited. Calls that cannot go wait in one line per cartridge and
are admitted oldest first as slots free up (a waiter whose chain has room may overtake one
whose chain is full, so one busy cap does not block the others).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ...manifest import effective_capacity
from ...urn import CapUrn, UrnError

_ALL = "all"


def _canon(text: str) -> str:
    try:
        return str(CapUrn.parse(text))
    except UrnError:
        return text


class _Pool:
    __slots__ = ("active", "limit", "members", "name")

    def __init__(self, name: str, limit: int, members: tuple[str, ...]) -> None:
        self.name = name
        self.limit = limit
        self.members = members
        self.active = 0

    def has_room(self) -> bool:
        return self.limit == 0 or self.active < self.limit


#: The pools one admitted call holds a slot in (what :meth:`PoolGate.acquire` returns).
Chain = tuple[_Pool, ...]


class _Waiter:
    __slots__ = ("chain", "error", "event", "granted")

    def __init__(self, chain: tuple[_Pool, ...]) -> None:
        self.chain = chain
        self.event = anyio.Event()
        self.granted = False
        self.error: BaseException | None = None


class PoolGate:
    """Admission for one cartridge process, built from its ``pools`` JSON."""

    def __init__(self, pools: Mapping[str, Any] | None = None) -> None:
        self._pools: dict[str, _Pool] = {}
        self._line: list[_Waiter] = []
        self._chains: dict[str, tuple[_Pool, ...]] = {}
        self._by_text: dict[str, tuple[_Pool, ...]] = {}  # same, by the text asked for
        self._abort: BaseException | None = None
        self.update(pools or {})

    def update(self, pools: Mapping[str, Any]) -> None:
        """Apply a (new) pools map; limits change, active counts are kept."""
        for name, state in pools.items():
            if not isinstance(state, Mapping):
                continue
            configured = state.get("configured", 0)
            available = state.get("available")
            limit = effective_capacity(
                configured if isinstance(configured, int) else 0,
                available if isinstance(available, int) else None,
            )
            caps = state.get("caps") or ()
            members = tuple(_canon(c) for c in caps if isinstance(c, str))
            key = name if name == _ALL or members else _canon(name)
            pool = self._pools.get(key)
            if pool is None:
                self._pools[key] = _Pool(key, limit, members)
            else:
                pool.limit = limit
                pool.members = members
        self._chains.clear()
        self._by_text.clear()
        self._admit()

    def chain(self, cap: str) -> tuple[_Pool, ...]:
        """The pools a call to handler ``cap`` occupies."""
        chain = self._by_text.get(cap)
        if chain is not None:
            return chain
        chain = self._by_text[cap] = self._chain(_canon(cap))
        return chain

    def _chain(self, canon: str) -> tuple[_Pool, ...]:
        chain = self._chains.get(canon)
        if chain is None:
            parts = []
            single = self._pools.get(canon)
            if single is not None and not single.members:
                parts.append(single)
            parts += [
                p for n, p in self._pools.items() if n != _ALL and p.members and canon in p.members
            ]
            if _ALL in self._pools:
                parts.append(self._pools[_ALL])
            chain = tuple(parts)
            self._chains[canon] = chain
        return chain

    @property
    def queued(self) -> int:
        return len(self._line)

    @property
    def active(self) -> int:
        pool = self._pools.get(_ALL)
        return pool.active if pool is not None else 0

    async def acquire(self, cap: str) -> Chain:
        """Wait for a slot in every pool of ``cap``'s chain (FIFO); returns the chain to release.

        :raises BaseException: the error given to :meth:`abort` (the cartridge died).
        """
        if self._abort is not None:
            raise self._abort
        chain = self.chain(cap)
        if (
            not self._line or not any(all(p.has_room() for p in w.chain) for w in self._line)
        ) and all(p.limit == 0 or p.active < p.limit for p in chain):
            for p in chain:
                p.active += 1
            return chain
        waiter = _Waiter(chain)
        self._line.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self.release(chain)
            else:
                self._line.remove(waiter)
            raise
        if waiter.error is not None:
            raise waiter.error
        return chain

    def abort(self, error: BaseException) -> None:
        """The cartridge is gone: every waiter (and later arrival) gets ``error``."""
        self._abort = error
        line, self._line = self._line, []
        for waiter in line:
            waiter.error = error
            waiter.event.set()

    def release(self, chain: Chain) -> None:
        """Give back the slots of an admitted call and admit whoever can go now."""
        for p in chain:
            if p.active > 0:
                p.active -= 1
        self._admit()

    def _admit(self) -> None:
        i = 0
        while i < len(self._line):
            waiter = self._line[i]
            if all(p.has_room() for p in waiter.chain):
                del self._line[i]
                for p in waiter.chain:
                    p.active += 1
                waiter.granted = True
                waiter.event.set()
            else:
                i += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        """``{pool: {limit, active}}`` for status reports."""
        return {n: {"limit": p.limit, "active": p.active} for n, p in self._pools.items()}
