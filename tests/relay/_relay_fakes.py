"""Inventories and hosts for the relay core tests, without IO."""

from __future__ import annotations

from typing import Any

import cbor2

from cartridge_runtime.protocol import (
    IDENTITY_CAP,
    Frame,
    FrameType,
    Limits,
    MessageId,
    frames,
)
from cartridge_runtime.relay import SwitchCore, ToHost, encode_inventory, relay_notify
from cartridge_runtime.urn import CapUrn


def record(
    ident: str,
    caps: list[str],
    *,
    running: bool = True,
    pools: dict[str, Any] | None = None,
    attachment_error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One installed-cartridge record in the wire shape (identity cap included)."""
    all_caps = [IDENTITY_CAP, *caps]
    if pools is None:
        names = [CapUrn.parse(c).text for c in all_caps]
        pools = {name: {"declared": 0, "configured": 0, "active": 0, "queued": 0} for name in names}
        pools["all"] = {"declared": 0, "configured": 0, "active": 0, "queued": 0, "caps": names}
    item: dict[str, Any] = {
        "registry_url": None,
        "id": ident,
        "channel": "release",
        "version": "1.0.0",
        "sha256": "0" * 64,
        "cap_groups": [{"name": "default", "caps": [{"urn": c} for c in all_caps]}],
        "runtime_stats": {"running": running, "pools": pools},
    }
    if attachment_error is not None:
        item["attachment_error"] = attachment_error
    return item


def notify(*records: dict[str, Any], limits: Limits | None = None) -> Frame:
    return relay_notify(encode_inventory(list(records)), limits or Limits())


def echo_probe(core: SwitchCore, host: str, sent: list[Any], now: float = 0.0) -> list[Any]:
    """Answer the identity probe among ``sent`` the way a healthy host does."""
    probe = [a.frame for a in sent if isinstance(a, ToHost) and a.host == host]
    req = next(f for f in probe if f.frame_type is FrameType.REQ and f.cap == IDENTITY_CAP)
    chunk = next(f for f in probe if f.frame_type is FrameType.CHUNK)
    rid, xid = req.id, req.routing_id
    out: list[Any] = []
    for frame in (
        frames.stream_start(rid, "output", "media:", xid=xid),
        frames.chunk(rid, "output", 0, chunk.payload or b"", xid=xid, seq=1),
        frames.stream_end(rid, "output", 1, xid=xid, seq=2),
        frames.end(rid, xid=xid, seq=3),
    ):
        out += core.receive(host, frame, now)
    return out


def attach_healthy(core: SwitchCore, host: str, *records: dict[str, Any]) -> list[Any]:
    sent = core.attach(host, notify(*records), 0.0)
    if any(isinstance(a, ToHost) and a.frame.frame_type is FrameType.REQ for a in sent):
        sent += echo_probe(core, host, sent)
    return sent


def nonce_of(sent: list[Any]) -> bytes:
    chunk = next(a.frame for a in sent if a.frame.frame_type is FrameType.CHUNK)
    value = cbor2.loads(chunk.payload)
    assert isinstance(value, bytes)
    return value


def new_req(cap: str) -> Frame:
    return frames.req(MessageId.new(), cap)
