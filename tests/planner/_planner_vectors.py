"""The planner vectors (capdag 1.524.58's answers) and a reader of their caps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from cartridge_runtime.manifest import CapDef

VECTORS: Final = (
    Path(__file__).resolve().parent.parent.parent / "protocol_spec" / "vectors" / "planner"
)
FILES: Final = sorted(VECTORS.glob("pl-*.json"))


def load(path: Path) -> dict[str, Any]:
    """One vector file, whole."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def caps_of(data: dict[str, Any]) -> list[CapDef]:
    """The file's cap set as cap definitions, in file order."""
    return [CapDef.from_json(cap) for cap in data["caps"]]
