"""The quick filter of output schemas against the full Draft 7 validator: it passes only what
the validator accepts, and passes the plain valid values the outputs carry."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.engine._schema_fast import compile_schema

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.text("ab", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)
_types = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.text("ab", max_size=2)
)


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": _types | st.lists(_types, min_size=1, max_size=3),
            "properties": st.dictionaries(st.sampled_from("abc"), inner, max_size=2),
            "required": st.lists(st.sampled_from("abc"), max_size=2, unique=True),
            "items": inner,
            "additionalProperties": st.booleans() | inner,
            "enum": st.lists(_scalars, min_size=1, max_size=3),
            "const": _scalars,
            "minimum": st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False),
            "maximum": st.integers(-3, 3),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.floats(-3, 3, allow_nan=False),
            "minLength": st.integers(0, 2),
            "maxLength": st.integers(0, 2),
            "pattern": st.sampled_from(["^a", "b$", "a+b"]),
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 2),
            "title": st.text(max_size=3),
        },
    )


_schema = st.recursive(st.booleans() | _schemas(st.just({})), _schemas, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schema, values=st.lists(_json, min_size=1, max_size=5))
def test_the_filter_passes_only_what_the_validator_accepts(schema: Any, values: list[Any]) -> None:
    passes = compile_schema(schema)
    assert passes is not None  # every keyword drawn here is one it writes out
    validator = jsonschema.Draft7Validator(schema)
    for value in values:
        if passes(value):
            assert validator.is_valid(value), (schema, value)


def test_plain_valid_records_pass_and_broken_ones_do_not() -> None:
    schema = {
        "type": "object",
        "required": ["id", "name"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "integer", "minimum": 0},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
            "kind": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
    }
    passes = compile_schema(schema)
    assert passes is not None
    assert passes({"id": 3, "name": "lamp", "kind": "a", "tags": ["x"]})
    for broken in (
        {"id": -1, "name": "lamp"},
        {"id": 3},
        {"id": 3, "name": "Lamp"},
        {"id": 3, "name": "lamp", "kind": "c"},
        {"id": 3, "name": "lamp", "tags": ["x", "y", "z"]},
        {"id": 3, "name": "lamp", "tags": [1]},
        {"id": 3, "name": "lamp", "colour": "red"},
        [],
    ):
        assert not passes(broken), broken


def test_a_schema_with_other_keywords_is_left_to_the_validator() -> None:
    assert compile_schema({"anyOf": [{"type": "string"}]}) is None
    assert compile_schema({"properties": {"a": {"$ref": "#/definitions/x"}}}) is None
    assert compile_schema({"items": [{"type": "string"}]}) is None
