"""What a host announces: its inventory of installed cartridges, carried by RELAY_NOTIFY.

RELAY_NOTIFY (id 0, seq 0) holds meta ``manifest`` (the bytes of a JSON object
``{"installed_cartridges": [record, ...], "host_protocol_stats"?: {...}}``) followed by the four
limits (RLY-2). RELAY_STATE (id 0) holds an opaque payload a host keeps (RLY-4). This module
reads and writes both, and turns records into the canonical cap URNs and admission pools the
switch routes by. Nothing here does IO.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..protocol import (
    POOL_ALL,
    ZERO_ID,
    Frame,
    FrameType,
    HandshakeError,
    Limits,
)
from ..urn import CapUrn, UrnError
from ._errors import RelayProtocolError

__all__ = (
    "CartridgeRecord",
    "Inventory",
    "encode_inventory",
    "parse_inventory",
    "pool_chain",
    "read_relay_notify",
    "relay_notify",
    "relay_state",
)

#: The release channels a record may name (the reference refuses any other word).
_CHANNELS = ("release", "nightly")


@attrs.frozen(kw_only=True)
class CartridgeRecord:
    """One installed cartridge as its host describes it (RLY-3).

    ``caps`` are the canonical cap URNs of its ``cap_groups``, in first-seen order; ``raw`` is
    the record's JSON object as received (what is forwarded or shown, unchanged).
    """

    registry_url: str | None
    id: str
    channel: str
    version: str
    sha256: str
    caps: tuple[str, ...]
    attachment_error: Mapping[str, Any] | None
    running: bool
    pools: Mapping[str, Mapping[str, Any]] | None = attrs.field(repr=False)
    raw: Mapping[str, Any] = attrs.field(repr=False)

    @property
    def key(self) -> tuple[str | None, str, str, str, str]:
        """The install's identity: ``(registry_url, channel, id, version, sha256)``."""
        return (self.registry_url, self.channel, self.id, self.version, self.sha256)

    @property
    def routable(self) -> bool:
        """Whether its caps may be routed to (no attachment error)."""
        return self.attachment_error is None


@attrs.frozen(kw_only=True)
class Inventory:
    """A host's announced inventory: its records and, when sent, its protocol statistics."""

    records: tuple[CartridgeRecord, ...] = ()
    host_protocol_stats: Mapping[str, Any] | None = None

    @property
    def caps(self) -> tuple[str, ...]:
        """Every routable cap of every record, canonical, first seen first, once."""
        seen: dict[str, None] = {}
        for record in self.records:
            if record.routable:
                for cap in record.caps:
                    seen.setdefault(cap, None)
        return tuple(seen)

    def owner(self, cap: str) -> CartridgeRecord | None:
        """The first routable record that offers ``cap`` (canonical text)."""
        for record in self.records:
            if record.routable and cap in record.caps:
                return record
        return None


def _fail(message: str) -> RelayProtocolError:
    return RelayProtocolError(f"RELAY_NOTIFY inventory: {message}")


def _canonical_caps(item: Mapping[str, Any]) -> tuple[str, ...]:
    groups = item.get("cap_groups") or []
    if not isinstance(groups, list):
        raise _fail("cap_groups must be an array")
    seen: dict[str, None] = {}
    for group in groups:
        caps = group.get("caps") if isinstance(group, dict) else None
        for cap in caps if isinstance(caps, list) else ():
            text = cap.get("urn") if isinstance(cap, dict) else None
            if not text:
                continue
            if not isinstance(text, str):
                raise _fail(f"a cap urn is not text: {text!r}")
            try:
                seen.setdefault(CapUrn.parse(text).text, None)
            except UrnError as exc:
                raise _fail(f"invalid cap URN {text!r}: {exc}") from None
    return tuple(seen)


def _record(item: Any) -> CartridgeRecord:
    if not isinstance(item, dict):
        raise _fail("each installed_cartridges entry must be an object")
    channel = item.get("channel")
    if channel not in _CHANNELS:
        raise _fail(f"channel must be 'release' or 'nightly', not {channel!r}")
    if "registry_url" not in item:
        raise _fail("an entry lacks registry_url (null for a local install)")
    registry_url = item["registry_url"]
    if registry_url is not None and not isinstance(registry_url, str):
        raise _fail("registry_url must be null or text")
    error = item.get("attachment_error")
    if error is not None and not isinstance(error, dict):
        raise _fail("attachment_error must be an object")
    stats = item.get("runtime_stats")
    running = False
    pools: Mapping[str, Mapping[str, Any]] | None = None
    if stats is not None:
        if not isinstance(stats, dict):
            raise _fail("runtime_stats must be an object")
        pools = stats.get("pools")
        if not isinstance(pools, dict) or not all(isinstance(v, dict) for v in pools.values()):
            raise _fail("runtime_stats.pools must be an object of pool states")
        running = stats.get("running") is True
    return CartridgeRecord(
        registry_url=registry_url,
        id=str(item.get("id", "")),
        channel=channel,
        version=str(item.get("version", "")),
        sha256=str(item.get("sha256", "")),
        caps=_canonical_caps(item),
        attachment_error=error,
        running=running,
        pools=pools,
        raw=item,
    )


def parse_inventory(data: bytes) -> Inventory:
    """Read the ``manifest`` bytes of a RELAY_NOTIFY.

    :raises RelayProtocolError: not JSON, no ``installed_cartridges`` array, or a record the
        reference would refuse (unknown channel, no ``registry_url``, an invalid cap URN,
        malformed statistics).
    """
    try:
        parsed = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(f"not JSON: {exc}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("installed_cartridges"), list):
        raise _fail("an object with an installed_cartridges array is required")
    stats = parsed.get("host_protocol_stats")
    return Inventory(
        records=tuple(_record(item) for item in parsed["installed_cartridges"]),
        host_protocol_stats=stats if isinstance(stats, dict) else None,
    )


def encode_inventory(
    records: Sequence[Mapping[str, Any]], host_protocol_stats: Mapping[str, Any] | None = None
) -> bytes:
    """The ``manifest`` bytes for ``records`` (JSON objects in the wire shape of RLY-3)."""
    body: dict[str, Any] = {"installed_cartridges": list(records)}
    if host_protocol_stats is not None:
        body["host_protocol_stats"] = dict(host_protocol_stats)
    return json.dumps(body).encode("utf-8")


def relay_notify(manifest: bytes, limits: Limits) -> Frame:
    """RELAY_NOTIFY: meta ``manifest`` then the four limits, in the reference's order."""
    meta: dict[str, Any] = {"manifest": manifest}
    meta.update(limits.to_meta())
    return Frame(frame_type=FrameType.RELAY_NOTIFY, id=ZERO_ID, meta=meta)


def relay_state(payload: bytes) -> Frame:
    """RELAY_STATE: the switch's opaque resources payload for a host."""
    return Frame(frame_type=FrameType.RELAY_STATE, id=ZERO_ID, payload=payload)


def read_relay_notify(frame: Frame) -> tuple[Inventory, Limits]:
    """The inventory and limits a RELAY_NOTIFY carries.

    :raises RelayProtocolError: not a RELAY_NOTIFY, no ``manifest`` bytes, limits missing or
        not positive integers, or an inventory :func:`parse_inventory` refuses.
    """
    if frame.frame_type is not FrameType.RELAY_NOTIFY:
        raise RelayProtocolError(f"expected RELAY_NOTIFY, got {frame.frame_type.name}")
    meta = frame.meta or {}
    manifest = meta.get("manifest")
    if not isinstance(manifest, (bytes, bytearray)):
        raise RelayProtocolError("RELAY_NOTIFY without manifest bytes")
    try:
        limits = Limits.from_meta(meta)
    except HandshakeError as exc:
        raise RelayProtocolError(f"RELAY_NOTIFY limits: {exc}") from None
    return parse_inventory(bytes(manifest)), limits


def _capacity(running: bool, name: str, state: Mapping[str, Any]) -> int:
    if not running and name == POOL_ALL:
        return 1  # a cartridge not running yet is given one call, to prove its start-up
    available = state.get("available")
    value = available if isinstance(available, int) else state.get("configured", 0)
    return value if isinstance(value, int) and value > 0 else 0


def pool_chain(
    record: CartridgeRecord, cap: str, *, answered: bool = False
) -> tuple[tuple[str, int], ...]:
    """The admission chain of ``cap`` on ``record``: ``(pool, capacity)`` for its singleton
    pool, each shared pool listing it (by name), then ``all``; capacity 0 is unlimited. A
    record not running gets one call at a time through ``all`` until it ``answered`` one.

    :raises RelayProtocolError: the record is running but its pool map does not cover ``cap``.
    """
    pools = record.pools
    if answered and not record.running:
        return tuple((name, 0) for name, _c in pool_chain(record, cap))
    if not pools:
        if record.running:
            raise _fail(f"cartridge {record.id!r} runs but announces no pools")
        return ((POOL_ALL, 1),)
    names = [cap]
    names += sorted(
        name
        for name, state in pools.items()
        if name not in (POOL_ALL, cap) and cap in (state.get("caps") or ())
    )
    names.append(POOL_ALL)
    missing = [name for name in names if name not in pools]
    if missing:
        if record.running:
            raise _fail(f"cartridge {record.id!r} has no pool {missing[0]!r} for {cap}")
        names = [name for name in names if name in pools] or [POOL_ALL]
    return tuple((name, _capacity(record.running, name, pools.get(name, {}))) for name in names)
