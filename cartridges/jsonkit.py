#!/usr/bin/env python3
"""``jsonkit``: a bundled cartridge that queries JSON documents with a small path language.

Cap ``query`` (``cap:in="media:fmt=json";op=query;out="media:fmt=json;json-match;list"``):
the main input is a JSON document, the argument ``path`` (position 0) a path expression. Each
match goes out as one sequence item — the matched value as compact JSON text — with per-item
meta ``{"path": normalized path}``. A second declared output,
``media:fmt=json;query-stats;record`` (reached with ``output_for``), carries
``{"path", "matches", "visited"}``: the normalized path, how many values matched, and how
many nodes the evaluation looked at.

Errors name the argument that caused them (``arg_urn``), class ``input``:

* ``INVALID_JSON`` — the document is not UTF-8 JSON (or nests too deeply); ``arg_urn`` is the
  document's media URN (:data:`JSON_DOC`);
* ``INVALID_PATH`` — the path does not parse; ``arg_urn`` is :data:`JSON_PATH`, and the
  message gives the character offset.

Path language (``python cartridges/jsonkit.py query '$.store.book[?price<10].title' < doc``)::

    path      := ["$"] step*            a path may start directly with a step or a name:
                                        "a.b" means "$.a.b", "..id" means "$..id"
    step      := "." name               member of an object
               | "." "*"                every child (object values, array elements)
               | ".." name              recursive descent: member `name` at any depth
               | ".." "*"               every descendant
               | ".." "[" selector "]"  the selector applied at every depth
               | "[" selector "]"
    selector  := integer                array element; negative counts from the end
               | "*"                    every child
               | string                 object member with any key: ['a key'] or ["a key"]
               | "?" filter             the children for which the filter holds
    filter    := ["@."] field [op literal]   without op: the field exists
    field     := name ("." name)*       looked up inside the child being tested
    op        := "==" | "!=" | "<" | "<=" | ">" | ">="
    literal   := JSON number | string ('...' or "...") | true | false | null
    name      := [A-Za-z_][A-Za-z0-9_-]*

Semantics: every step maps the current list of values to a new list, in document order; a step
that does not apply (a member of an array, an index of an object, an index out of range) gives
nothing rather than an error. ``==`` and ``!=`` compare JSON values (``true`` is not ``1``);
the ordering operators compare two numbers or two strings and are false otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, OpError, WetContext
from cartridge_runtime.urn import media_matches_for_stream

#: A JSON document (the main input).
JSON_DOC: Final = "media:fmt=json"
#: A path expression in the language above (UTF-8 text).
JSON_PATH: Final = "media:enc=utf-8;json-path"
#: The matches: one item per matched value, as compact JSON text.
MATCH_LIST: Final = "media:fmt=json;json-match;list"
#: The statistics object of a query.
QUERY_STATS: Final = "media:fmt=json;query-stats;record"

CAP_QUERY: Final = 'cap:in="media:fmt=json";op=query;out="media:fmt=json;json-match;list"'

#: The longest path expression accepted (a path is typed by a person, not generated).
MAX_PATH_LENGTH: Final = 4096


class PathSyntaxError(ValueError):
    """A path expression that does not parse; ``position`` is the offending offset."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at offset {position}")
        self.position = position


# -- the parsed path --------------------------------------------------------------------------

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_INT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_OPS: Final = ("==", "!=", "<=", ">=", "<", ">")
_MISSING: Final = object()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Filter:
    """``[?field op literal]`` (``op`` is ``None`` for an existence test)."""

    field: tuple[str, ...]
    op: str | None = None
    literal: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """One step: ``kind`` is ``member``, ``index``, ``wildcard`` or ``filter``; ``deep`` marks
    recursive descent (``..``)."""

    kind: str
    deep: bool = False
    key: str = ""
    index: int = 0
    filter: Filter | None = None

    def text(self) -> str:
        """The step written back in normal form."""
        prefix = ".." if self.deep else ""
        if self.kind == "member":
            if _NAME.fullmatch(self.key):
                return f"{prefix or '.'}{self.key}"
            return f"{prefix}[{json.dumps(self.key)}]"
        if self.kind == "wildcard":
            return "..*" if self.deep else "[*]"
        if self.kind == "index":
            return f"{prefix}[{self.index}]"
        assert self.filter is not None
        flt = self.filter
        body = ".".join(flt.field)
        if flt.op is not None:
            body += f"{flt.op}{json.dumps(flt.literal)}"
        return f"{prefix}[?{body}]"


class _Parser:
    """Recursive-descent parser of the grammar in the module docstring."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> PathSyntaxError:
        return PathSyntaxError(message, self.pos)

    def peek(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def eat(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            found = self.text[self.pos : self.pos + 1] or "end of path"
            raise self.fail(f"expected {token!r}, found {found!r}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def name(self) -> str:
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a member name")
        self.pos = match.end()
        return match.group()

    def string(self) -> str:
        quote = self.text[self.pos]
        end = self.pos + 1
        while end < len(self.text) and self.text[end] != quote:
            end += 2 if self.text[end] == "\\" else 1
        if end >= len(self.text):
            raise self.fail("unterminated string")
        body = self.text[self.pos + 1 : end]
        if quote == "'":
            body = body.replace('"', '\\"').replace("\\'", "'")
        try:
            value = json.loads(f'"{body}"')
        except ValueError:
            raise self.fail("bad escape in string") from None
        self.pos = end + 1
        return str(value)

    def literal(self) -> Any:
        if self.pos < len(self.text) and self.text[self.pos] in "'\"":
            return self.string()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.eat(word):
                return value
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a literal (number, string, true, false or null)")
        self.pos = match.end()
        return json.loads(match.group())

    def filter(self) -> Filter:
        self.skip_space()
        self.eat("@.")
        field = [self.name()]
        while self.eat("."):
            field.append(self.name())
        self.skip_space()
        op = next((candidate for candidate in _OPS if self.peek(candidate)), None)
        if op is None:
            return Filter(field=tuple(field))
        self.pos += len(op)
        self.skip_space()
        return Filter(field=tuple(field), op=op, literal=self.literal())

    def selector(self, deep: bool) -> Step:
        self.skip_space()
        if self.eat("*"):
            step = Step(kind="wildcard", deep=deep)
        elif self.eat("?"):
            step = Step(kind="filter", deep=deep, filter=self.filter())
        elif self.pos < len(self.text) and self.text[self.pos] in "'\"":
            step = Step(kind="member", deep=deep, key=self.string())
        else:
            match = _INT.match(self.text, self.pos)
            if match is None:
                raise self.fail("expected an index, '*', a quoted key or '?filter'")
            self.pos = match.end()
            step = Step(kind="index", deep=deep, index=int(match.group()))
        self.skip_space()
        self.expect("]")
        return step

    def steps(self) -> list[Step]:
        if not self.eat("$") and _NAME.match(self.text, self.pos):
            self.text = self.text[: self.pos] + "." + self.text[self.pos :]
        result: list[Step] = []
        while self.pos < len(self.text):
            if self.eat(".."):
                if self.eat("*"):
                    result.append(Step(kind="wildcard", deep=True))
                elif self.eat("["):
                    result.append(self.selector(deep=True))
                else:
                    result.append(Step(kind="member", deep=True, key=self.name()))
            elif self.eat("."):
                if self.eat("*"):
                    result.append(Step(kind="wildcard"))
                else:
                    result.append(Step(kind="member", key=self.name()))
            elif self.eat("["):
                result.append(self.selector(deep=False))
            else:
                raise self.fail(f"unexpected {self.text[self.pos]!r}")
        return result


def parse_path(text: str) -> list[Step]:
    """Parse a path expression.

    :raises PathSyntaxError: it does not follow the grammar (or is empty or too long).
    """
    if not text.strip():
        raise PathSyntaxError("the path is empty", 0)
    if len(text) > MAX_PATH_LENGTH:
        raise PathSyntaxError(f"the path is longer than {MAX_PATH_LENGTH} characters", 0)
    return _Parser(text.strip()).steps()


def path_text(steps: list[Step]) -> str:
    """The normal form of a parsed path (``$`` followed by each step)."""
    return "$" + "".join(step.text() for step in steps)


# -- evaluation -------------------------------------------------------------------------------

Node = tuple[str, Any]  # (normalized location, value)


def _member_path(base: str, key: str) -> str:
    return f"{base}.{key}" if _NAME.fullmatch(key) else f"{base}[{json.dumps(key)}]"


def _children(node: Node) -> Iterator[Node]:
    location, value = node
    if isinstance(value, dict):
        for key, child in value.items():
            yield _member_path(location, key), child
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield f"{location}[{index}]", child


def _descendants_or_self(node: Node) -> Iterator[Node]:
    """Pre-order walk without recursion (deep documents do not hit the recursion limit)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(_children(current))))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


_ORDER: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _holds(flt: Filter, value: Any) -> bool:
    for key in flt.field:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    if flt.op is None:
        return True
    if flt.op == "==":
        return _same(value, flt.literal)
    if flt.op == "!=":
        return not _same(value, flt.literal)
    numbers = all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in (value, flt.literal)
    )
    strings = isinstance(value, str) and isinstance(flt.literal, str)
    return (numbers or strings) and _ORDER[flt.op](value, flt.literal)


class Evaluator:
    """Applies parsed steps to a document, counting the nodes it looks at (``visited``)."""

    def __init__(self) -> None:
        self.visited = 0

    def _apply(self, step: Step, node: Node) -> Iterator[Node]:
        location, value = node
        self.visited += 1
        if step.kind == "member":
            if isinstance(value, dict) and step.key in value:
                yield _member_path(location, step.key), value[step.key]
        elif step.kind == "index":
            if isinstance(value, list) and -len(value) <= step.index < len(value):
                index = step.index % len(value)
                yield f"{location}[{index}]", value[index]
        elif step.kind == "wildcard":
            yield from _children(node)
        else:
            assert step.filter is not None
            for child in _children(node):
                self.visited += 1
                if _holds(step.filter, child[1]):
                    yield child

    def run(self, steps: list[Step], document: Any) -> Iterator[Node]:
        """Every match, in document order."""
        nodes: list[Node] = [("$", document)]
        for step in steps:
            following: list[Node] = []
            for node in nodes:
                if step.deep and step.kind == "wildcard":
                    walk = _descendants_or_self(node)
                    next(walk)  # ``..*`` is every descendant, not the node itself
                    for found in walk:
                        self.visited += 1
                        following.append(found)
                elif step.deep:
                    for candidate in _descendants_or_self(node):
                        following.extend(self._apply(step, candidate))
                else:
                    following.extend(self._apply(step, node))
            nodes = following
        return iter(nodes)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_document(data: bytes) -> Any:
    """Parse a UTF-8 JSON document (``NaN``/``Infinity`` refused).

    :raises OpError: ``INVALID_JSON``, class ``input``, ``arg_urn`` = :data:`JSON_DOC`.
    """
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        detail = f"not UTF-8 ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError) as exc:
        detail = str(exc) or "nested too deeply"
    raise OpError("INVALID_JSON", f"the document is not valid JSON: {detail}", "input", JSON_DOC)


def compile_path(text: str) -> list[Step]:
    """:func:`parse_path` with the failure as the cap's error.

    :raises OpError: ``INVALID_PATH``, class ``input``, ``arg_urn`` = :data:`JSON_PATH`.
    """
    try:
        return parse_path(text)
    except PathSyntaxError as exc:
        raise OpError(
            "INVALID_PATH", f"bad path {text[:80]!r}: {exc}", "input", JSON_PATH
        ) from None


def query(document: Any, path: str) -> tuple[list[Node], int]:
    """Evaluate ``path`` on an already-parsed document: ``(matches, visited)``."""
    evaluator = Evaluator()
    matches = list(evaluator.run(parse_path(path), document))
    return matches, evaluator.visited


# -- the handler ------------------------------------------------------------------------------


class JsonQuery(Op):
    """Matches of a path in a JSON document as sequence items, plus a statistics output."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        package = req.take_input()
        path_bytes = await package.require_stream(JSON_PATH)
        try:
            path_source = path_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise OpError(
                "INVALID_PATH", "the path is not UTF-8 text", "input", JSON_PATH
            ) from None
        steps = compile_path(path_source)
        document_bytes = await package.find_stream(JSON_DOC)
        if document_bytes is None:  # the fallback lookup: the first stream that is not the path
            others = [
                data
                for urn, data in await package.collect_streams()
                if not media_matches_for_stream(JSON_PATH, urn)
            ]
            if not others:
                raise OpError("MISSING_INPUT", "no JSON document arrived", "input", JSON_DOC)
            document_bytes = others[0]
        document = load_document(document_bytes)
        evaluator = Evaluator()
        out = req.output()
        await out.start(is_sequence=True)
        count = 0
        for location, value in evaluator.run(steps, document):
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            await out.emit_text(text, meta={"path": location})
            count += 1
        stats = {"path": path_text(steps), "matches": count, "visited": evaluator.visited}
        await req.output_for(QUERY_STATS).write(json.dumps(stats).encode("utf-8"))
        req.finish(1.0, f"{count} match(es)")


MANIFEST: Final = Manifest.build(
    name="jsonkit",
    version="1.0.0",
    description="Query JSON documents with a small path language.",
    caps=[
        CapDef.simple(
            CAP_QUERY,
            "Query a JSON document",
            aliases=("query",),
            description="The values a path selects in a JSON document, one sequence item each.",
            documentation=(
                "Path language: $ root; .name member; .* or [*] every child; [n] index "
                "(negative from the end); ['key'] any key; ..name recursive descent; "
                "[?field op literal] filter with op one of == != < <= > >= (no op: exists)."
            ),
            input_description="a JSON document",
            output_name="matches",
            output_description="one item per match: the value as compact JSON text; meta path",
            output_is_sequence=True,
            extra_args=[
                ArgDef.positional(
                    JSON_PATH, 0, name="path", description="path expression, e.g. $.items[0].id"
                )
            ],
            extra_outputs=[
                OutputDef(
                    media_urn=QUERY_STATS,
                    name="stats",
                    output_description="JSON object: path (normalized), matches, visited",
                )
            ],
        )
    ],
)


def build_runtime() -> CartridgeRuntime:
    """The cartridge: :data:`MANIFEST` with :class:`JsonQuery` registered."""
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(CAP_QUERY, JsonQuery)
    return runtime


if __name__ == "__main__":
    build_runtime().run()
