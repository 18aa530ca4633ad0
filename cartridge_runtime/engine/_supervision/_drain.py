"""Retiring a cartridge: let its calls in flight finish within a drain, then end the rest with
``CARTRIDGE_RETIRED`` and stop its instances (HST-21).

Rules
-----
1. A retired cartridge takes no new call and starts no instance: routing has already moved to
   its successor (a replacement) or forgotten it (a removal) when the drain begins.
2. Calls in flight, and calls queued for a pool of one of its instances, finish on it for up to
   the drain; a call never moves to another version once it was sent. Calls still waiting for
   one of its instances to start are drained too when it is removed (the start-up goes on and
   serves them); when it is replaced they go to the new version, already running, and the old
   start-up is stopped.
3. When the drain ends, every call still running gets a CANCEL with code ``CARTRIDGE_RETIRED``
   and fails with it at once; then each instance is shut down (stdin closed, a kill after the
   shutdown grace).
"""

from __future__ import annotations

import anyio
import attrs

from .._call import CallState
from .._replicas import CartridgeSlot
from ._errors import CartridgeRetired
from ._lifecycle import InstanceState

__all__ = ("Drained", "retire")

#: The longest wait between two looks at a draining cartridge's calls, seconds.
_POLL = 0.05


def _busy(slot: CartridgeSlot) -> bool:
    if slot.waiting and not slot.replaced:
        return True  # calls waiting for a start-up: a removal lets it finish and serve them
    for replica in slot.replicas:
        conn = replica.conn
        if conn is not None and not conn.core.gone and (conn.in_flight or conn.gate.queued):
            return True
    return False


@attrs.frozen(kw_only=True)
class Drained:
    """How a drain went: ``seconds`` taken of the ``limit``, ``ended`` calls cut at it."""

    seconds: float
    limit: float
    ended: int


async def retire(slot: CartridgeSlot, *, drain: float, grace: float) -> Drained:
    """Drain and stop ``slot`` (see the module's rules); how the drain went."""
    slot.retired = True
    step = min(_POLL, max(drain / 20, 0.005))
    began = anyio.current_time()
    with anyio.move_on_after(drain):
        # The counters belong to the connections' tasks: looked at, not waited on.
        while _busy(slot):  # noqa: ASYNC110
            await anyio.sleep(step)
    taken = min(anyio.current_time() - began, drain)
    ended = 0
    error = CartridgeRetired(
        f"cartridge {slot.name} was retired (replaced or removed) and the call did not finish "
        f"within the drain of {drain:g} s"
    )
    live = []
    for replica in slot.replicas:
        conn = replica.conn
        if conn is None or conn.core.gone:
            continue
        replica.ending = InstanceState.RETIRED
        replica.last_exit = f"retired after a drain of {taken:.2f} s (of {drain:g} s allowed)"
        for flow in list(conn.core.calls.values()):
            ended += 1
            if isinstance(flow, CallState):
                flow.end_now(error, "the cartridge was retired")
            else:
                flow.on_death(error)
        conn.gate.abort(error)
        live.append(conn)
    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for conn in live:
                tg.start_soon(conn.close, grace)
    return Drained(seconds=taken, limit=drain, ended=ended)
