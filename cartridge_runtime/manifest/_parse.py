"""Small typed readers for manifest JSON, plus the URN bridge.

Every reader takes the JSON object, the key and the path of the object, and
raises :class:`ManifestParseError` naming the full path when the key is
missing or has the wrong JSON type. Nothing else escapes the parser.

The URN layer is imported lazily so that this package imports even while the
URN package is being built, and so that modules that only serialize never pay
for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from ._errors import ManifestParseError, ManifestUrnError

if TYPE_CHECKING:
    from cartridge_runtime.urn import CapUrn, MediaUrn

__all__ = (
    "MISSING",
    "join",
    "fail",
    "as_object",
    "req_text",
    "opt_text",
    "req_bool",
    "opt_bool",
    "as_list",
    "parse_cap_urn",
    "parse_media_urn",
    "canonical_cap_urn",
)


class _Missing:
    """Marker for "key absent" (distinct from JSON ``null``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def join(path: str, key: str | int) -> str:
    """Extend a JSON path with an object key or a list index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def fail(detail: str, path: str | None, *, cap_urn: str | None = None) -> NoReturn:
    """Raise the parse error for ``path``."""
    raise ManifestParseError(detail, cap_urn=cap_urn, field=path or None)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def as_object(value: Any, path: str, *, cap_urn: str | None = None) -> Mapping[str, Any]:
    """``value`` as a JSON object, or a parse error."""
    if not isinstance(value, Mapping):
        fail(f"expected an object, got {_type_name(value)}", path, cap_urn=cap_urn)
    return value


def as_list(value: Any, path: str, *, cap_urn: str | None = None) -> list[Any]:
    """``value`` as a JSON array, or a parse error."""
    if not isinstance(value, list):
        fail(f"expected an array, got {_type_name(value)}", path, cap_urn=cap_urn)
    return value


def req_text(data: Mapping[str, Any], key: str, path: str, *, cap_urn: str | None = None) -> str:
    """The required string ``data[key]``."""
    if key not in data:
        fail(f"missing required field {key!r}", join(path, key), cap_urn=cap_urn)
    value = data[key]
    if not isinstance(value, str):
        fail(f"expected a string, got {_type_name(value)}", join(path, key), cap_urn=cap_urn)
    return value


def opt_text(
    data: Mapping[str, Any], key: str, path: str, *, cap_urn: str | None = None
) -> str | None:
    """The optional string ``data[key]`` (absent or ``null`` gives ``None``)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        fail(f"expected a string, got {_type_name(value)}", join(path, key), cap_urn=cap_urn)
    return value


def req_bool(data: Mapping[str, Any], key: str, path: str, *, cap_urn: str | None = None) -> bool:
    """The required boolean ``data[key]``."""
    if key not in data:
        fail(f"missing required field {key!r}", join(path, key), cap_urn=cap_urn)
    value = data[key]
    if not isinstance(value, bool):
        fail(f"expected a boolean, got {_type_name(value)}", join(path, key), cap_urn=cap_urn)
    return value


def opt_bool(
    data: Mapping[str, Any],
    key: str,
    path: str,
    default: bool = False,
    *,
    cap_urn: str | None = None,
) -> bool:
    """The optional boolean ``data[key]`` (absent or ``null`` gives ``default``)."""
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        fail(f"expected a boolean, got {_type_name(value)}", join(path, key), cap_urn=cap_urn)
    return value


def parse_cap_urn(text: str, *, field: str | None = None, cap_urn: str | None = None) -> CapUrn:
    """Parse a cap URN, turning the URN layer's error into :class:`ManifestUrnError`."""
    from cartridge_runtime.urn import CapUrn, UrnError

    try:
        return CapUrn.parse(text)
    except UrnError as exc:
        raise ManifestUrnError(
            f"{text!r} is not a valid cap URN: {exc}", cap_urn=cap_urn, field=field
        ) from exc


def parse_media_urn(text: str, *, field: str | None = None, cap_urn: str | None = None) -> MediaUrn:
    """Parse a media URN, turning the URN layer's error into :class:`ManifestUrnError`."""
    from cartridge_runtime.urn import MediaUrn, UrnError

    try:
        return MediaUrn.parse(text)
    except UrnError as exc:
        raise ManifestUrnError(
            f"{text!r} is not a valid media URN: {exc}", cap_urn=cap_urn, field=field
        ) from exc


def canonical_cap_urn(text: str) -> str:
    """The canonical text of a cap URN (what the reference writes in a manifest)."""
    if not isinstance(text, str):
        raise ManifestParseError(f"a cap URN is a string, not {_type_name(text)}", field="urn")
    return str(parse_cap_urn(text, field="urn", cap_urn=text))
