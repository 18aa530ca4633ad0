"""A JSON Schema compiled to one Python function, to pass valid outputs quickly (HST-24).

A general validator walks the schema for every value it meets, which costs seconds on a 1 MiB
document of records. Most output schemas use a handful of keywords (``type``, ``properties``,
``required``, ``items``, bounds, ``pattern``, ``enum``), so :func:`compile_schema` writes the
checks of such a schema out as the source of one function (loops and ``type(...) is``
tests, no call per schema node) and compiles it once per definition.

The function is a filter, never the judge: it answers ``True`` only for values the schema
accepts, and may answer ``False`` for some it accepts too (it reads ``integer`` as a Python
``int``, ``enum`` as equal values of the same type). A ``False`` sends the value to the full
validator, which finds the first failure or clears it. A schema with any other keyword
compiles to ``None``: the full validator checks every value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ("compile_schema",)

#: Keywords that only describe: they never fail a value (``format`` is not asserted by a
#: Draft 7 validator without a format checker).
_ANNOTATIONS = frozenset(
    ("title", "description", "default", "examples", "$comment", "$schema", "$id", "format")
)
_TYPE_TEST = {
    "object": "type({v}) is dict",
    "array": "type({v}) is list",
    "string": "type({v}) is str",
    "integer": "type({v}) is int",
    "number": "(type({v}) is int or type({v}) is float)",
    "boolean": "type({v}) is bool",
    "null": "{v} is None",
}
_SCALARS = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    """The schema uses something the compiler does not write out."""


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self._names = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def const(self, value: Any) -> str:
        key = self.name("c")
        self.consts[key] = value
        return key

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def schema(self, schema: Any, v: str, depth: int) -> None:
        """Write the checks of ``schema`` on the value named ``v``."""
        if schema is True or schema == {}:
            return
        if schema is False:
            self.line(depth, "return False")
            return
        if not isinstance(schema, dict):
            raise _Unsupported(type(schema).__name__)
        known = {
            "type", "properties", "required", "items", "additionalProperties", "enum",
            "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
            "minLength", "maxLength", "pattern", "minItems", "maxItems",
        }  # fmt: skip
        for key in schema:
            if key not in known and key not in _ANNOTATIONS:
                raise _Unsupported(key)
        self._type(schema.get("type"), v, depth)
        self._values(schema, v, depth)
        self._numbers(schema, v, depth)
        self._strings(schema, v, depth)
        self._arrays(schema, v, depth)
        self._objects(schema, v, depth)

    def _type(self, wanted: Any, v: str, depth: int) -> None:
        if wanted is None:
            return
        names = [wanted] if isinstance(wanted, str) else wanted
        if not isinstance(names, list) or not names or any(n not in _TYPE_TEST for n in names):
            raise _Unsupported("type")
        test = " or ".join(_TYPE_TEST[n].format(v=v) for n in names)
        self.line(depth, f"if not ({test}):")
        self.line(depth + 1, "return False")

    def _values(self, schema: dict[str, Any], v: str, depth: int) -> None:
        choices: list[Any] | None = None
        if "enum" in schema:
            choices = schema["enum"]
            if not isinstance(choices, list):
                raise _Unsupported("enum")
        if "const" in schema:
            choices = [schema["const"]] if choices is None else choices
            choices = [c for c in choices if type(c) is type(schema["const"])]
            choices = [c for c in choices if c == schema["const"]]
        if choices is None:
            return
        if any(not isinstance(c, _SCALARS) for c in choices):
            raise _Unsupported("enum of arrays or objects")
        pairs = self.const(frozenset((type(c), c) for c in choices))
        self.line(depth, f"if not _among({v}, {pairs}):")
        self.line(depth + 1, "return False")

    def _numbers(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = []
        for key, op in (
            ("minimum", "<"),
            ("maximum", ">"),
            ("exclusiveMinimum", "<="),
            ("exclusiveMaximum", ">="),
        ):
            bound = schema.get(key)
            if bound is None:
                continue
            if type(bound) not in (int, float):
                raise _Unsupported(key)
            tests.append(f"{v} {op} {bound!r}")
        if tests:
            self.line(
                depth, f"if (type({v}) is int or type({v}) is float) and ({' or '.join(tests)}):"
            )
            self.line(depth + 1, "return False")

    def _strings(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = _length_tests(schema, v, "minLength", "maxLength")
        if "pattern" in schema:
            try:
                compiled = re.compile(schema["pattern"])
            except (re.error, TypeError):
                raise _Unsupported("pattern") from None
            tests.append(f"{self.const(compiled)}.search({v}) is None")
        if tests:
            self.line(depth, f"if type({v}) is str and ({' or '.join(tests)}):")
            self.line(depth + 1, "return False")

    def _arrays(self, schema: dict[str, Any], v: str, depth: int) -> None:
        tests = _length_tests(schema, v, "minItems", "maxItems")
        items = schema.get("items", True)
        if isinstance(items, list):
            raise _Unsupported("items as a list")
        if not tests and (items is True or items == {}):
            return
        self.line(depth, f"if type({v}) is list:")
        if tests:
            self.line(depth + 1, f"if {' or '.join(tests)}:")
            self.line(depth + 2, "return False")
        if items is not True and items != {}:
            x = self.name("v")
            self.line(depth + 1, f"for {x} in {v}:")
            before = len(self.lines)
            self.schema(items, x, depth + 2)
            if len(self.lines) == before:
                self.line(depth + 2, "pass")

    def _objects(self, schema: dict[str, Any], v: str, depth: int) -> None:
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        if not isinstance(required, list) or any(not isinstance(k, str) for k in required):
            raise _Unsupported("required")
        if not isinstance(properties, dict):
            raise _Unsupported("properties")
        if not required and not properties and (extra is True or extra == {}):
            return
        self.line(depth, f"if type({v}) is dict:")
        inner = depth + 1
        self.line(inner, "pass")
        if required:
            keys = self.const(frozenset(required))
            self.line(inner, f"if not {keys} <= {v}.keys():")
            self.line(inner + 1, "return False")
        for key, sub in properties.items():
            x = self.name("v")
            self.line(inner, f"{x} = {v}.get({key!r}, _ABSENT)")
            self.line(inner, f"if {x} is not _ABSENT:")
            before = len(self.lines)
            self.schema(sub, x, inner + 1)
            if len(self.lines) == before:
                self.line(inner + 1, "pass")
        if extra is False:
            allowed = self.const(frozenset(properties))
            self.line(inner, f"if not {v}.keys() <= {allowed}:")
            self.line(inner + 1, "return False")
        elif extra is not True and extra != {}:
            k, x = self.name("k"), self.name("v")
            allowed = self.const(frozenset(properties))
            self.line(inner, f"for {k}, {x} in {v}.items():")
            self.line(inner + 1, f"if {k} not in {allowed}:")
            before = len(self.lines)
            self.schema(extra, x, inner + 2)
            if len(self.lines) == before:
                self.line(inner + 2, "pass")


def _among(value: Any, pairs: frozenset[tuple[type, Any]]) -> bool:
    """Whether ``value`` is one of ``pairs`` (type and value both equal)."""
    try:
        return (type(value), value) in pairs
    except TypeError:  # an array or an object: never among scalars
        return False


def compile_schema(schema: Any) -> Callable[[Any], bool] | None:
    """A function that answers ``True`` only for values ``schema`` accepts (see the module
    docstring), or ``None`` when the schema uses a keyword it does not write out."""
    writer = _Writer()
    writer.line(0, "def passes(v0):")
    try:
        writer.schema(schema, "v0", 1)
    except _Unsupported:
        return None
    writer.line(1, "return True")
    namespace: dict[str, Any] = {"_ABSENT": object(), "_among": _among, **writer.consts}
    exec(compile("\n".join(writer.lines), "<output schema>", "exec"), namespace)
    passes: Callable[[Any], bool] = namespace["passes"]
    return passes


def _length_tests(schema: dict[str, Any], v: str, low: str, high: str) -> list[str]:
    """The failing tests of a length bound pair (``minLength``/``maxLength``, ...) on ``v``.

    :raises _Unsupported: a bound is not an integer.
    """
    tests = []
    for key, op in ((low, "<"), (high, ">")):
        bound = schema.get(key)
        if bound is None:
            continue
        if type(bound) is not int:
            raise _Unsupported(key)
        tests.append(f"len({v}) {op} {bound}")
    return tests
