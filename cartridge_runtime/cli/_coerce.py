"""Light coercion of command-line values: text, paths, numbers, flags, enum members, lists.

typer coerces every parameter through a pydantic ``TypeAdapter``: importing pydantic and
building the adapters costs more than the rest of a command's start. The parameters of the
``cartridge`` commands are plain types, so :func:`light_coercer` converts them directly, with
click's own error wording; a parameter with constraints (``min``, ``exists``, a parser, ...)
or another type returns ``None`` and keeps typer's coercion.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

__all__ = ("light_coercer",)

#: A converter of one raw value; raises ``ValueError`` with the message to show.
Convert = Callable[[Any], Any]

_WORDS = {int: "integer", float: "float"}


def _number(kind: type) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a valid {_WORDS[kind]}.") from None

    return convert


def _member(kind: type[enum.Enum]) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in kind)
            raise ValueError(f"{value!r} is not one of {choices}.") from None

    return convert


_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(f"{value!r} is not a valid boolean.")


def _leaf(annotation: Any) -> Convert | None:
    if annotation is bool:
        return _flag
    if annotation is str:
        return lambda value: value if isinstance(value, str) else str(value)
    if annotation is Path:
        return lambda value: value if isinstance(value, Path) else Path(value)
    if annotation in _WORDS:
        return _number(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _member(annotation)
    return None


def _unconstrained(info: Any) -> bool:
    """Whether the parameter asks for nothing beyond its type (typer checks the rest)."""
    return (
        getattr(info, "parser", None) is None
        and getattr(info, "min", None) is None
        and getattr(info, "max", None) is None
        and not getattr(info, "exists", False)
        and not getattr(info, "resolve_path", False)
        and not getattr(info, "writable", False)
        and getattr(info, "file_okay", True)
        and getattr(info, "dir_okay", True)
        and not getattr(info, "allow_dash", False)
        and getattr(info, "path_type", None) is None
        and getattr(info, "case_sensitive", True)
    )


def light_coercer(annotation: Any, info: Any) -> Convert | None:
    """The converter of a parameter of ``annotation`` (a list converts each value), or
    ``None`` when typer must coerce it."""
    if not _unconstrained(info):
        return None
    if get_origin(annotation) is list:
        (inner,) = get_args(annotation) or (None,)
        leaf = _leaf(inner)
        if leaf is None:
            return None
        return lambda values: [leaf(v) for v in values]
    return _leaf(annotation)
