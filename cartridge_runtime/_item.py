"""The sequence-item value shared by the engine and the test harness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._redact import describe, describe_meta


@attrs.frozen
class Item:
    """One sequence item with optional per-item meta (the meta rides on the item's first
    CHUNK). Put it in an input list to attach meta: ``Item(b"x", {"page": 1})`` or
    ``Item(value=b"x", meta={"page": 1})``; responses report items the same way."""

    value: Any = attrs.field(repr=describe)
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)
