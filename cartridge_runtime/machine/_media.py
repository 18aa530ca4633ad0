"""Media definitions a machine's constants are held to (MCH-4).

A media definition may carry validation rules (``min``/``max`` for numbers, ``min_length``/
``max_length`` for strings, by their UTF-8 bytes, and arrays, ``pattern`` and
``allowed_values`` for strings) and a JSON Schema (Draft 7). A constant bound to an arg is
known when the machine is resolved, so that is when it is checked against the definition of
the arg's media URN: given definitions, a constant whose arg has none cannot be checked and is
refused, as one that breaks a rule or the schema is (``ConstantFailsValidationError``).
Without definitions (``parse_machine(..., media=None)``) constants are not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import attrs

from cartridge_runtime.urn import MediaUrn, UrnError

from ._errors import ConstantFailsValidationError

__all__ = ("MediaValidation", "MediaDef", "MediaTable")


def _bound_text(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    text = format(Decimal(repr(float(value))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen(kw_only=True)
class MediaValidation:
    """The validation rules of a media definition; a rule passes the values it is not about."""

    min: float | None = None
    max: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    allowed_values: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MediaValidation:
        allowed = data.get("allowed_values")
        return cls(
            min=data.get("min"),
            max=data.get("max"),
            min_length=data.get("min_length"),
            max_length=data.get("max_length"),
            pattern=data.get("pattern"),
            allowed_values=tuple(allowed) if allowed is not None else None,
        )

    def violation(self, value: Any) -> str | None:
        """The first rule ``value`` breaks, described, or None.

        :raises ValueError: a rule cannot be applied (a pattern that is not a regex).
        """
        if _number(value):
            if self.min is not None and value < self.min:
                return f"minimum value {_bound_text(self.min)}"
            if self.max is not None and value > self.max:
                return f"maximum value {_bound_text(self.max)}"
        length, what = None, ""
        if isinstance(value, str):
            length = len(value.encode("utf-8"))
        elif isinstance(value, list):
            length, what = len(value), "array "
        if length is not None:
            if self.min_length is not None and length < self.min_length:
                return f"minimum {what}length {self.min_length}"
            if self.max_length is not None and length > self.max_length:
                return f"maximum {what}length {self.max_length}"
        if self.pattern is not None and isinstance(value, str):
            try:
                compiled = re.compile(self.pattern)
            except re.error as error:
                raise ValueError(f"the pattern '{self.pattern}' is not a regex: {error}") from None
            if compiled.search(value) is None:
                return f"pattern '{self.pattern}'"
        allowed = self.allowed_values
        if allowed is not None and isinstance(value, str) and value not in allowed:
            listed = ", ".join(json.dumps(v, ensure_ascii=False) for v in allowed)
            return f"allowed values: [{listed}]"
        return None


@attrs.frozen(kw_only=True)
class MediaDef:
    """A media definition: its URN, its validation rules and its JSON Schema, if any."""

    urn: str
    validation: MediaValidation | None = None
    schema: Any = attrs.field(default=None, eq=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MediaDef:
        """From a media definition as the registry stores it (``urn``, ``validation``,
        ``schema``; other keys are ignored)."""
        rules = data.get("validation")
        return cls(
            urn=str(data["urn"]),
            validation=MediaValidation.from_json(rules) if rules else None,
            schema=data.get("schema"),
        )


def _schema_violations(schema: Any, value: Any) -> list[str]:
    import jsonschema

    try:
        jsonschema.Draft7Validator.check_schema(schema)
        validator = jsonschema.Draft7Validator(schema)
    except jsonschema.SchemaError as error:
        return [f"the schema does not compile: {error.message}"]
    # Where and which keyword, never the value itself (it may be a secret).
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'} fails '{error.validator}'"
        for error in validator.iter_errors(value)
    ]


class MediaTable:
    """Media definitions by canonical media URN."""

    def __init__(self, defs: Iterable[MediaDef | Mapping[str, Any]]) -> None:
        self._by_urn: dict[str, MediaDef] = {}
        for entry in defs:
            media_def = entry if isinstance(entry, MediaDef) else MediaDef.from_json(entry)
            try:
                key = MediaUrn.parse(media_def.urn).text
            except UrnError:
                continue  # a definition no URN can name: never looked up
            self._by_urn.setdefault(key, media_def)

    def get(self, urn: str) -> MediaDef | None:
        try:
            return self._by_urn.get(MediaUrn.parse(urn).text)
        except UrnError:
            return None

    def check(self, step: str, arg: str, arg_media: str, value: Any) -> None:
        """Hold a constant to the definition of its arg's media URN.

        :raises ConstantFailsValidationError: no definition, a broken rule or schema.
        """

        def refused(why: str) -> ConstantFailsValidationError:
            kind = type(value).__name__
            return ConstantFailsValidationError(
                f"step '{step}': the constant ({kind}) given to arg '{arg}' is refused: {why}"
            )

        media_def = self.get(arg_media)
        if media_def is None:
            raise refused(f"no media definition of '{arg_media}' to check it against")
        if media_def.validation is not None:
            try:
                rule = media_def.validation.violation(value)
            except ValueError as error:
                raise refused(str(error)) from None
            if rule is not None:
                raise refused(f"it breaks the rule: {rule}")
        if media_def.schema is not None:
            broken = _schema_violations(media_def.schema, value)
            if broken:
                raise refused("it does not match the schema: " + "; ".join(broken))
