"""Health probes of a cartridge connection: HEARTBEAT out, reply (with stats and pools) in.

A probe that gets no reply within ``EngineConfig.heartbeat_timeout`` marks the cartridge
unhealthy; after ``EngineConfig.heartbeat_misses_to_kill`` such probes in a row the periodic
loop kills it (a cartridge whose event loop is stuck, e.g. in an async handler that never
yields, would otherwise hold its calls forever): its calls fail with
:class:`~._errors.CartridgeUnhealthy` and the next call starts it again. The pools in a reply
update admission.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import anyio

from ..protocol import Frame, FrameType, MessageId, frames

if TYPE_CHECKING:
    from ._conn import Connection

log = logging.getLogger("cartridge_runtime.engine")


async def probe(conn: Connection, reply_within: float | None = None) -> bool:
    """Send one HEARTBEAT and wait for its reply; update health. Returns healthy."""
    hid = MessageId.new()
    event = anyio.Event()
    replies: list[Frame] = []
    conn._hb_pending[hid] = (event, replies)
    try:
        conn.send(frames.heartbeat(hid))
        with anyio.move_on_after(
            conn.config.heartbeat_timeout if reply_within is None else reply_within
        ):
            await event.wait()
    finally:
        conn._hb_pending.pop(hid, None)
    if not replies:
        if conn.healthy:
            log.warning("%s: no heartbeat reply; marked unhealthy", conn.name)
        conn.healthy = False
        conn.counters.heartbeat_misses += 1
        return False
    conn.healthy = True
    conn.last_heartbeat = anyio.current_time()
    meta = dict(replies[0].meta or {})
    pools = meta.pop("pools", None)
    if isinstance(pools, bytes | str):
        try:
            parsed = json.loads(pools)
            if isinstance(parsed, dict):
                conn.gate.update(parsed)
        except ValueError:
            conn.counters.protocol_errors += 1
    conn.remote_stats = meta
    return True


async def heartbeat_loop(conn: Connection) -> None:
    interval = conn.config.heartbeat_interval
    limit = conn.config.heartbeat_misses_to_kill
    assert interval
    misses = 0
    while conn.state == "ready":
        await anyio.sleep(interval)
        if conn.state != "ready":
            break
        misses = 0 if await probe(conn) else misses + 1
        if limit is not None and misses >= limit and conn.state == "ready":
            timeout = conn.config.heartbeat_timeout
            log.warning("%s: %d heartbeats missed; killing it", conn.name, misses)
            conn.kill(
                f"killed by the engine: it answered none of {misses} health probes in a row "
                f"(each given {timeout:g} s); an async handler that never yields blocks them",
                unhealthy=True,
            )
            break


async def set_capacities(conn: Connection, desired: dict[str, int], reply_within: float) -> None:
    """Send a HEARTBEAT whose ``desired_capacities`` sets pool capacities (FLW-14), and apply
    the reply's pools to admission.

    :raises CallError: the cartridge knows no such pool (``UNKNOWN_POOL``, class
        ``internal``, none changed), or gave no reply in time (``TIMEOUT``).
    """
    from ._errors import CallError

    hid = MessageId.new()
    event = anyio.Event()
    replies: list[Frame] = []
    conn._hb_pending[hid] = (event, replies)
    try:
        conn.send(frames.heartbeat(hid, meta={"desired_capacities": json.dumps(desired).encode()}))
        with anyio.move_on_after(reply_within):
            await event.wait()
    finally:
        conn._hb_pending.pop(hid, None)
    if not replies:
        raise CallError("TIMEOUT", "resource", f"cartridge {conn.name}: no heartbeat reply")
    reply = replies[0]
    meta = dict(reply.meta or {})
    if reply.frame_type is not FrameType.HEARTBEAT:
        raise CallError(
            str(meta.get("code") or "UNKNOWN_POOL"),
            str(meta.get("attribution_class") or "internal"),
            str(meta.get("message") or "pool capacity refused"),
        )
    pools = meta.pop("pools", None)
    if isinstance(pools, bytes | str):
        try:
            parsed = json.loads(pools)
            if isinstance(parsed, dict):
                conn.gate.update(parsed)
        except ValueError:
            conn.counters.protocol_errors += 1
    conn.remote_stats = meta
