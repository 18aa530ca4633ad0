"""A host's inventory from its engine: one installed-cartridge record per cartridge (RLY-3)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Any

from ...protocol import Limits
from ...urn import CapUrn, UrnError
from .._status import CartridgeStatus

__all__ = ("host_limits", "inventory_records")

#: The attachment error kind of a cartridge whose start-up failed (the reference's word).
_HANDSHAKE_FAILED = "handshake_failed"


def _canonical(cap: str) -> str:
    try:
        return CapUrn.parse(cap).text
    except UrnError:
        return cap


def _pools(status: CartridgeStatus, caps: list[str]) -> dict[str, Any]:
    """The pool states in the reference's shape: a singleton pool per cap, then ``all``."""
    names = [_canonical(c) for c in caps]
    out: dict[str, Any] = {}
    seen = status.pools
    for name in names:
        limit = seen.get(name, {}).get("limit", 0)
        active = seen.get(name, {}).get("active", 0)
        out[name] = {"declared": limit, "configured": limit, "active": active, "queued": 0}
    for name, state in seen.items():
        if name not in out and name != "all":
            limit = state.get("limit", 0)
            out[name] = {
                "declared": limit,
                "configured": limit,
                "active": state.get("active", 0),
                "queued": 0,
            }
    every = seen.get("all", {})
    out["all"] = {
        "declared": every.get("limit", 0),
        "configured": every.get("limit", 0),
        "active": every.get("active", 0),
        "queued": status.queued,
        "caps": names,
    }
    return out


def _record(status: CartridgeStatus, manifest: Any) -> dict[str, Any]:
    if manifest is not None:
        body = manifest.to_json_bytes()
        name, version, channel = manifest.name, manifest.version, manifest.channel
        registry_url = manifest.registry_url
        groups = [group.to_json() for group in manifest.cap_groups]
    else:
        body = status.name.encode()
        name, version, channel, registry_url, groups = status.name, "", "release", None, []
    caps = [cap["urn"] for group in groups for cap in group.get("caps", ())]
    running = status.state == "running"
    record: dict[str, Any] = {
        "registry_url": registry_url,
        "id": name,
        "channel": channel,
        "version": version,
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    if groups:
        record["cap_groups"] = groups
    if status.state == "failed":
        record["attachment_error"] = {
            "kind": _HANDSHAKE_FAILED,
            "message": status.last_error or "start-up failed",
            "detected_at_unix_seconds": int(time.time()),
        }
    beat = status.last_heartbeat
    record["runtime_stats"] = {
        "running": running,
        "pid": status.pid if running else None,
        "active_request_count": status.in_flight,
        "peer_request_count": 0,
        "memory_footprint_mb": (status.resident_memory or 0) >> 20,
        "memory_rss_mb": (status.resident_memory or 0) >> 20,
        "last_heartbeat_unix_seconds": int(beat) if beat is not None else None,
        "restart_count": max(0, status.starts - 1),
        "protocol_drops_total": None,
        "pools": _pools(status, caps),
    }
    if manifest is not None and status.state != "failed":
        record["lifecycle"] = "operational"
    return record


def inventory_records(
    statuses: Iterable[CartridgeStatus], manifest_of: Any
) -> list[dict[str, Any]]:
    """One record per cartridge, in the order they were added (``manifest_of(name)``: its
    manifest or ``None``)."""
    return [_record(status, manifest_of(status.name)) for status in statuses]


def host_limits(running: Iterable[Limits]) -> Limits:
    """The element-wise minimum of the running cartridges' limits (the defaults: none)."""
    out = Limits()
    for limits in running:
        out = Limits(
            max_frame=min(out.max_frame, limits.max_frame),
            max_chunk=min(out.max_chunk, limits.max_chunk),
            max_reorder_buffer=min(out.max_reorder_buffer, limits.max_reorder_buffer),
            initial_credit=min(out.initial_credit, limits.initial_credit),
        )
    return out
