"""The sequence-item value shared by the engine and the test harness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ._redact import describe, describe_meta


class Item(NamedTuple):
    """One sequence item with optional per-item meta (the meta rides on the item's first
    CHUNK). Put it in an input list to attach meta: ``Item(b"x", {"page": 1})`` or
    ``Item(value=b"x", meta={"page": 1})``; responses report items the same way, in the
    engine's :class:`~cartridge_runtime.engine.Result` and the harness's results alike.

    It is a ``(value, meta)`` pair, so ``for value, meta in items`` works and an item equals
    the pair. ``repr`` shows the value's type and the meta's keys, never their contents.
    """

    value: Any
    meta: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Item(value={describe(self.value)}, meta={describe_meta(self.meta)})"

    def __str__(self) -> str:
        return repr(self)
