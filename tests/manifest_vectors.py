"""Shared helpers for the manifest tests: pull HELLO manifests, pools maps and
heartbeat replies out of the stored frame vectors (decoded with plain cbor2,
so these tests do not depend on our own codec)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cbor2

FRAMES = Path(__file__).resolve().parent.parent / "protocol_spec" / "vectors" / "frames"

#: Every session file (top level and engine-link).
SESSION_FILES = sorted(FRAMES.glob("*.jsonl")) + sorted(FRAMES.glob("engine-link/*.jsonl"))

#: The handlers the vector cartridge registers: every declared cap except the
#: orphan (declared without a handler), plus the two the reference runtime
#: registers on its own (discard and adapter selection).
ORPHAN = "cap:peer-orphan"
AUTO_REGISTERED = (
    "cap:out=media:void",
    'cap:in="media:";out="media:adapter-selection;fmt=json;record"',
)


def frames(path: Path) -> Iterator[dict[str, Any]]:
    """Every line of a session file, parsed."""
    with path.open() as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def wire_map(record: dict[str, Any]) -> dict[Any, Any]:
    """The CBOR map of a stored frame (full hex only)."""
    assert "hex_truncated" not in record
    return cbor2.loads(bytes.fromhex(record["hex"])[4:])


def cartridge_hellos(path: Path) -> list[dict[Any, Any]]:
    """Meta maps of every cartridge HELLO in a session file."""
    return [
        wire_map(record)[5]
        for record in frames(path)
        if record["dir"] == "cartridge->host" and record["type"] == "HELLO"
    ]


def hello_files() -> list[Path]:
    """Session files that contain at least one cartridge HELLO."""
    return [path for path in SESSION_FILES if cartridge_hellos(path)]


def heartbeat_replies(path: Path) -> list[bytes]:
    """``meta.pools`` bytes of every cartridge HEARTBEAT reply in a scenario."""
    return [
        wire_map(record)[5]["pools"]
        for record in frames(path)
        if record["dir"] == "cartridge->host" and record["type"] == "HEARTBEAT"
    ]


def vector_manifest_bytes() -> bytes:
    """The vector cartridge's manifest, as its HELLO carries it."""
    return cartridge_hellos(FRAMES / "01-handshake-identity-policy.jsonl")[0]["manifest"]
