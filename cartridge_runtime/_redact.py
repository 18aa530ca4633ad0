"""Describing values without showing them, for ``repr`` and error messages.

Argument values, output data and meta values may be secrets (a token, a password, a private
document). Nothing the project prints — a ``repr``, an exception message, a log line — shows
them; it shows their type and size instead (``<bytes: 12 bytes>``, ``<dict: 2 keys>``), and a
meta mapping shows its keys (keys are protocol vocabulary, values are the caller's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("describe", "describe_meta", "describe_values", "describe_items")


def describe(value: Any) -> str:
    """``<type: size>`` for a value, never the value itself."""
    name = type(value).__name__
    if value is None:
        return "None"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{name}: {len(value)} bytes>"
    if isinstance(value, str):
        return f"<str: {len(value)} chars>"
    if isinstance(value, Mapping):
        return f"<{name}: {len(value)} keys>"
    if isinstance(value, list | tuple | set | frozenset):
        return f"<{name}: {len(value)} items>"
    return f"<{name}>"


def describe_meta(meta: Any) -> str:
    """A meta mapping as its keys and value types (``{page: <int>}``), or ``None``."""
    if meta is None:
        return "None"
    if not isinstance(meta, Mapping):
        return describe(meta)
    return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in meta.items()) + "}"


def describe_values(values: Any) -> str:
    """A sequence of values as its length and element types."""
    return f"<{len(values)} values>"


def describe_items(items: Any) -> str:
    """A sequence of items as its length."""
    return f"<{len(items)} items>"
