"""Health probes of a cartridge connection, timed: HEARTBEAT out, reply (with stats and pools) in.

A probe that gets no reply within ``EngineConfig.heartbeat_timeout`` marks the cartridge
unhealthy; after ``EngineConfig.heartbeat_misses_to_kill`` such probes in a row the periodic
loop kills it (a cartridge whose event loop is stuck, e.g. in an async handler that never
yields, would otherwise hold its calls forever): its calls fail with
:class:`~._errors.CartridgeUnhealthy` and the next call starts it again. The pools in a reply
update admission.

The bookkeeping (which probes are pending, misses in a row, when to kill, what a reply says)
is the sans-IO :class:`~cartridge_runtime.protocol.HostConnection`'s; this module keeps the
time, and reaches its connection through :class:`ProbeLink`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio

from ...protocol import AttributionClass, ErrorCode, Frame, HealthReport
from .._errors import CallError

__all__ = ("HealthBook", "ProbeLink", "heartbeat_loop", "probe", "set_capacities")

log = logging.getLogger("cartridge_runtime.engine")


class HealthBook(Protocol):
    """The health bookkeeping of a connection (its sans-IO core)."""

    @property
    def healthy(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def misses(self) -> int: ...

    def probe_missed(self, *, periodic: bool) -> bool: ...

    def probe_answered(self, reply: Frame, now: float, *, periodic: bool) -> HealthReport: ...

    def read_reply(self, reply: Frame) -> HealthReport: ...


class ProbeLink(Protocol):
    """What health probes need from a connection."""

    @property
    def name(self) -> str: ...

    @property
    def core(self) -> HealthBook: ...

    async def ask(self, meta: Mapping[str, Any] | None, within: float) -> Frame | None:
        """Send a HEARTBEAT (with ``meta``) and wait up to ``within`` seconds for its reply."""

    def update_pools(self, pools: Mapping[str, Any]) -> None:
        """Apply a cartridge's pools to admission."""

    def kill(self, reason: str, *, unhealthy: bool = False) -> None: ...


async def probe(link: ProbeLink, within: float, *, periodic: bool = False) -> bool:
    """Send one HEARTBEAT and wait for its reply; update health. Returns healthy.

    A periodic probe that misses the limit of probes in a row kills the cartridge.
    """
    core = link.core
    reply = await link.ask(None, within)
    if reply is None:
        was_healthy = core.healthy
        kill = core.probe_missed(periodic=periodic)
        if was_healthy:
            log.warning("%s: no heartbeat reply; marked unhealthy", link.name)
        if kill:
            misses = core.misses
            log.warning("%s: %d heartbeats missed; killing it", link.name, misses)
            link.kill(
                f"killed by the engine: it answered none of {misses} health probes in a row "
                f"(each given {within:g} s); an async handler that never yields blocks them",
                unhealthy=True,
            )
        return False
    report = core.probe_answered(reply, anyio.current_time(), periodic=periodic)
    if report.pools is not None:
        link.update_pools(report.pools)
    return True


async def heartbeat_loop(link: ProbeLink, interval: float, within: float) -> None:
    """Task body: probe every ``interval`` seconds while the connection is ready."""
    core = link.core
    while core.ready:
        await anyio.sleep(interval)
        if not core.ready:
            break
        await probe(link, within, periodic=True)


async def set_capacities(link: ProbeLink, desired: dict[str, int], reply_within: float) -> None:
    """Send a HEARTBEAT whose ``desired_capacities`` sets pool capacities (FLW-14), and apply
    the reply's pools to admission.

    :raises CallError: the cartridge knows no such pool (``UNKNOWN_POOL``, class
        ``internal``, none changed), or gave no reply in time (``TIMEOUT``).
    """
    meta = {"desired_capacities": json.dumps(desired).encode()}
    reply = await link.ask(meta, reply_within)
    if reply is None:
        raise CallError(
            ErrorCode.TIMEOUT,
            AttributionClass.RESOURCE,
            f"cartridge {link.name}: no heartbeat reply",
        )
    report = link.core.read_reply(reply)
    refused = report.refused
    if refused is not None:
        raise CallError(
            refused.code or ErrorCode.UNKNOWN_POOL,
            refused.attribution_class or AttributionClass.INTERNAL,
            refused.message or "pool capacity refused",
        )
    if report.pools is not None:
        link.update_pools(report.pools)
