"""Engine-side admission: honour a cartridge's declared pool capacities with a FIFO line.

A cartridge announces its pools in HELLO (and again in each heartbeat reply). The decision of
which call may start is the protocol's :class:`~cartridge_runtime.protocol._admission.PoolAdmission`,
the same table the cartridge admits its own requests with; the gate only waits around it: a
call that cannot start waits on an event until a release or a new limit lets the table hand it
out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ...protocol import POOL_ALL, Pool, PoolAdmission
from ...urn import CapUrn, UrnError


def _canon(text: str) -> str:
    try:
        return str(CapUrn.parse(text))
    except UrnError:
        return text


#: The pools one admitted call holds a slot in (what :meth:`PoolGate.acquire` returns).
Chain = tuple[Pool, ...]


class _Waiter:
    __slots__ = ("error", "event", "granted")

    def __init__(self) -> None:
        # The event is made only for a call that has to wait (most never do).
        self.event: anyio.Event | None = None
        self.granted = False
        self.error: BaseException | None = None


class PoolGate:
    """Admission for one cartridge process, built from its ``pools`` JSON."""

    def __init__(self, pools: Mapping[str, Any] | None = None) -> None:
        self._table: PoolAdmission[_Waiter] = PoolAdmission()
        self._canon: dict[str, str] = {}  # cap text asked for -> the table's key
        # cap text asked for -> its chain, while the table's chains stand (``update`` clears)
        self._chains: dict[str, Chain] = {}
        self._abort: BaseException | None = None
        self.update(pools or {})

    def update(self, pools: Mapping[str, Any]) -> None:
        """Apply a (new) pools map; limits change, active counts are kept."""
        table = self._table
        self._chains.clear()
        for name, state in pools.items():
            if not isinstance(state, Mapping):
                continue
            configured = state.get("configured", 0)
            available = state.get("available")
            caps = state.get("caps") or ()
            members = tuple(_canon(c) for c in caps if isinstance(c, str))
            key = name if name == POOL_ALL or members else _canon(name)
            table.add_pool(key, 0, members).set_limits(
                configured if isinstance(configured, int) else 0,
                available if isinstance(available, int) else None,
            )
        self._admit()

    def chain(self, cap: str) -> Chain:
        """The pools a call to handler ``cap`` occupies."""
        key = self._canon.get(cap)
        if key is None:
            key = self._canon[cap] = _canon(cap)
        return self._table.chain_pools(key)

    @property
    def queued(self) -> int:
        return self._table.waiting

    @property
    def active(self) -> int:
        pool = self._table.pools.get(POOL_ALL)
        return pool.active if pool is not None else 0

    async def acquire(self, cap: str) -> Chain:
        """Wait for a slot in every pool of ``cap``'s chain (FIFO); returns the chain to release.

        :raises BaseException: the error given to :meth:`abort` (the cartridge died).
        """
        if self._abort is not None:
            raise self._abort
        key = self._canon.get(cap)
        if key is None:
            key = self._canon[cap] = _canon(cap)
        table = self._table
        chain = table.chain_pools(key)
        waiter = _Waiter()
        if table.arrive(key, waiter) is None:
            return chain
        event = waiter.event = anyio.Event()
        try:
            await event.wait()
        except BaseException:
            if waiter.granted:
                self.release(chain)
            else:
                table.remove_queued(lambda item: item is waiter)
            raise
        if waiter.error is not None:
            raise waiter.error
        return chain

    def try_acquire(self, cap: str) -> Chain | None:
        """A slot in every pool of ``cap``'s chain if one is free now and nobody waits ahead
        (the chain to release), else ``None`` with nothing taken: :meth:`acquire` waits."""
        if self._abort is not None:
            return None
        chain = self._chains.get(cap)
        if chain is None:
            chain = self._chains[cap] = self.chain(cap)
        return self._table.take(chain)

    def abort(self, error: BaseException) -> None:
        """The cartridge is gone: every waiter (and later arrival) gets ``error``."""
        self._abort = error
        for waiter in self._table.clear_line():
            waiter.error = error
            if waiter.event is not None:
                waiter.event.set()

    def release(self, chain: Chain) -> None:
        """Give back the slots of an admitted call and admit whoever can go now."""
        if self._table.release_chain(chain):
            self._admit()

    def _admit(self) -> None:
        table = self._table
        if not table.waiting:
            return
        while (admitted := table.admit_next()) is not None:
            waiter = admitted[1]
            waiter.granted = True
            if waiter.event is not None:
                waiter.event.set()

    def snapshot(self) -> dict[str, dict[str, int]]:
        """``{pool: {limit, active}}`` for status reports."""
        return {n: {"limit": p.limit, "active": p.active} for n, p in self._table.pools.items()}
