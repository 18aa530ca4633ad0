"""Health probes of a cartridge connection: HEARTBEAT out, reply (with stats and pools) in.

A probe that gets no reply within ``EngineConfig.heartbeat_timeout`` marks the cartridge
unhealthy (it is never killed for that); the pools in a reply update admission. Mixed into
:class:`~._conn.Connection`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import anyio

from ..protocol import Frame, MessageId, frames

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
    assert interval
    while conn.state == "ready":
        await anyio.sleep(interval)
        if conn.state != "ready":
            break
        await probe(conn)
