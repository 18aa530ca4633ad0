"""Metrics and trace events carried in LOG frames (spec REQ-39).

A handler's metric or trace event is a non-progress LOG like any other — level, attribution
class ``internal``, a non-empty message — with one more meta key holding the data:

* level ``metric``, meta ``metric`` = ``{"name": text, "value": int or float, "labels":
  {text: text}}``;
* level ``trace``, meta ``trace`` = ``{"name": text, "attributes": {text: text, int, float
  or bool}}``.

The reference (capdag 1.524.58) forwards LOG frames unchanged through its host and relay and
reads only ``level``, ``message``, ``attribution_class`` and ``arg_urn``, so a cartridge
sending these still works under a reference host (it shows them as log lines). Pure functions;
nothing here runs unless a handler asks for a metric or a trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from ..errors import DefinitionError

__all__ = (
    "METRIC_LEVEL",
    "TRACE_LEVEL",
    "MAX_TELEMETRY_NAME",
    "MAX_TELEMETRY_FIELDS",
    "TelemetryError",
    "metric_data",
    "trace_data",
    "read_metric",
    "read_trace",
)

METRIC_LEVEL: Final = "metric"
TRACE_LEVEL: Final = "trace"
#: Longest metric or trace name, in characters: names are identifiers, not payloads.
MAX_TELEMETRY_NAME: Final = 200
#: Most labels of a metric or attributes of a trace event: bounded so a LOG stays small.
MAX_TELEMETRY_FIELDS: Final = 64

_ATTRIBUTE_TYPES: Final = (str, int, float, bool)


class TelemetryError(DefinitionError):
    """A metric or trace event that cannot be sent (the message names the field, never a
    value)."""


def _name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise TelemetryError(f"a {what} name is non-empty text")
    if len(name) > MAX_TELEMETRY_NAME:
        raise TelemetryError(f"a {what} name has at most {MAX_TELEMETRY_NAME} characters")
    return name


def _fields(fields: Mapping[str, Any], what: str) -> None:
    if len(fields) > MAX_TELEMETRY_FIELDS:
        raise TelemetryError(f"at most {MAX_TELEMETRY_FIELDS} {what}")
    for key in fields:
        if not isinstance(key, str) or not key:
            raise TelemetryError(f"{what} are named by non-empty text")


def metric_data(name: str, value: float, labels: Mapping[str, Any]) -> dict[str, Any]:
    """The ``metric`` meta of a LOG (labels turned to text).

    :raises TelemetryError: a bad name, a value that is not a finite number, bad labels.
    """
    _name(name, "metric")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TelemetryError(f"metric {name!r}: the value is an int or a float")
    if isinstance(value, float) and not math.isfinite(value):
        raise TelemetryError(f"metric {name!r}: the value is finite")
    _fields(labels, "labels")
    return {"name": name, "value": value, "labels": {k: str(v) for k, v in labels.items()}}


def trace_data(name: str, attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The ``trace`` meta of a LOG.

    :raises TelemetryError: a bad name, or an attribute that is not text, int, float or bool.
    """
    _name(name, "trace event")
    _fields(attributes, "attributes")
    for key, value in attributes.items():
        if not isinstance(value, _ATTRIBUTE_TYPES):
            raise TelemetryError(
                f"trace event {name!r}: attribute {key!r} is text, int, float or bool"
            )
    return {"name": name, "attributes": dict(attributes)}


def read_metric(data: Any) -> tuple[str, float, dict[str, str]] | None:
    """``(name, value, labels)`` of a received ``metric`` meta, or ``None`` when malformed
    (a receiver then keeps the frame as an ordinary log line)."""
    if not isinstance(data, Mapping):
        return None
    name, value, labels = data.get("name"), data.get("value"), data.get("labels", {})
    if not isinstance(name, str) or not name or len(name) > MAX_TELEMETRY_NAME:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not isinstance(labels, Mapping) or len(labels) > MAX_TELEMETRY_FIELDS:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return name, value, dict(labels)


def read_trace(data: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name, attributes)`` of a received ``trace`` meta, or ``None`` when malformed."""
    if not isinstance(data, Mapping):
        return None
    name, attributes = data.get("name"), data.get("attributes", {})
    if not isinstance(name, str) or not name or len(name) > MAX_TELEMETRY_NAME:
        return None
    if not isinstance(attributes, Mapping) or len(attributes) > MAX_TELEMETRY_FIELDS:
        return None
    if not all(
        isinstance(k, str) and isinstance(v, _ATTRIBUTE_TYPES) for k, v in attributes.items()
    ):
        return None
    return name, dict(attributes)
