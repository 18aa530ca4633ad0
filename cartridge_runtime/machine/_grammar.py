"""The grammar of machine notation: text to a tree of spans (MCH-1, MCH-2).

A hand-written parser for the reference's PEG grammar, with the same ordered choices,
possessive repetitions and implicit whitespace (space, tab, CR, LF between the parts of a
non-atomic rule), so that it accepts exactly the texts the reference accepts. It knows no
cap, no node and no rule beyond the grammar: :mod:`._syntax` reads the tree it returns.

Theory of operation: every ``_rule`` method either returns a value and leaves ``self.pos``
after what it read, or returns ``None`` with ``self.pos`` where it started. Every failed
attempt at a terminal records what was expected at that offset; a text that does not parse
is reported at the furthest offset any attempt reached, which is where a person looks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeVar

import attrs

__all__ = (
    "RawMember",
    "RawTarget",
    "RawWiring",
    "RawHeader",
    "RawMachineHeader",
    "RawStatement",
    "GrammarError",
    "parse_tree",
)

_T = TypeVar("_T")

#: How deep a constant's arrays and objects may nest. Reading is recursive, so without a bound a
#: text of a few hundred ``[`` exhausts Python's stack (a RecursionError, not a refusal). The
#: reference refuses from about 80 (objects) or 105 (arrays) levels, where its own stack runs
#: out; a fixed bound below both refuses the same texts wherever the parser is called from.
MAX_NESTING: Final = 64

_WS: Final = re.compile(r"[ \t\r\n]*")
_ALIAS: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*+")
_NUMBER: Final = re.compile(
    r"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?+[0-9]++)?+(?![A-Za-z0-9_-])"
)
_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*+"')
_KEYWORD: Final = re.compile(r"(?:true|false|null)(?![A-Za-z0-9_-])")
_MACHINE_KW: Final = re.compile(r"machine(?![A-Za-z0-9_-])")
# A cap URN runs to the end of its statement: a `]` or a line break outside a quoted value.
_CAP_URN: Final = re.compile(r'cap:(?>"(?>\\"|\\\\|[^"])*+"|[^\]\r\n])*+')


@attrs.frozen
class Span:
    """Offsets ``[start, end)`` of a piece of the text."""

    start: int
    end: int


@attrs.frozen
class RawMember:
    """A member as written: ``name=value``, a constant, or a node; ``value`` is the span of
    the node or the constant."""

    name: Span | None
    value: Span
    is_constant: bool


@attrs.frozen
class RawTarget:
    name: Span | None
    node: Span


@attrs.frozen
class RawPolicyEntry:
    key: Span
    value: Span
    is_number: bool


@attrs.frozen
class RawWiring:
    start: int
    sources: tuple[RawMember, ...]
    #: Whether the sources were a group ``( ... )`` rather than one bare node.
    grouped_sources: bool
    step: Span
    policy: tuple[RawPolicyEntry, ...] | None
    targets: tuple[RawTarget, ...]


@attrs.frozen
class RawHeader:
    start: int
    alias: Span
    cap_urn: Span


@attrs.frozen
class RawMachineHeader:
    start: int
    alias: Span
    reference: Span


RawStatement = RawWiring | RawHeader | RawMachineHeader


class GrammarError(Exception):
    """The text is not notation: ``offset`` is where reading stopped, ``expected`` what
    would have been read there."""

    def __init__(self, offset: int, expected: tuple[str, ...]) -> None:
        self.offset = offset
        self.expected = expected
        super().__init__(f"at offset {offset}: expected {', '.join(expected)}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.furthest = 0
        self.expected: list[str] = []
        self.depth = 0

    # -- terminals -------------------------------------------------------------------------

    def fail(self, at: int, what: str) -> None:
        if at > self.furthest:
            self.furthest = at
            self.expected = [what]
        elif at == self.furthest and what not in self.expected:
            self.expected.append(what)

    def skip(self) -> None:
        pos = self.pos
        if pos < len(self.text) and self.text[pos] in " \t\r\n":
            match = _WS.match(self.text, pos)
            assert match is not None
            self.pos = match.end()

    def literal(self, token: str) -> bool:
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        if self.pos >= self.furthest:  # only the furthest failures are reported
            self.fail(self.pos, repr(token))
        return False

    def token(self, pattern: re.Pattern[str], what: str) -> Span | None:
        match = pattern.match(self.text, self.pos)
        if match is None:
            if self.pos >= self.furthest:
                self.fail(self.pos, what)
            return None
        self.pos = match.end()
        return Span(match.start(), match.end())

    def alias(self) -> Span | None:
        return self.token(_ALIAS, "a name")

    # -- rules -----------------------------------------------------------------------------

    def program(self) -> list[RawStatement]:
        statements: list[RawStatement] = []
        self.skip()
        while True:
            statement = self.stmt()
            if statement is None:
                break
            statements.append(statement)
            self.skip()
        if self.pos != len(self.text):
            self.fail(self.pos, "a statement")
            raise GrammarError(self.furthest, tuple(self.expected))
        return statements

    def stmt(self) -> RawStatement | None:
        start = self.pos
        if self.literal("["):
            self.skip()
            inner = self.inner()
            if inner is not None:
                self.skip()
                if self.literal("]"):
                    return inner
            self.pos = start
        return self.inner()

    def inner(self) -> RawStatement | None:
        return self.wiring() or self.machine_header() or self.header()

    def header(self) -> RawHeader | None:
        start = self.pos
        alias = self.alias()
        if alias is not None:
            self.skip()
            cap_urn = self.token(_CAP_URN, "a cap URN")
            if cap_urn is not None:
                return RawHeader(start, alias, cap_urn)
        self.pos = start
        return None

    def machine_header(self) -> RawMachineHeader | None:
        start = self.pos
        alias = self.alias()
        if alias is not None:
            self.skip()
            if self.token(_MACHINE_KW, "'machine'") is not None:
                self.skip()
                reference = self.token(_STRING, "a string")
                if reference is not None:
                    return RawMachineHeader(start, alias, reference)
        self.pos = start
        return None

    def wiring(self) -> RawWiring | None:
        start = self.pos
        sources = self.sources()
        if sources is not None:
            self.skip()
            if self.arrow():
                self.skip()
                step = self.alias()
                if step is not None:
                    policy = self.optional(self.policy)
                    self.skip()
                    if self.arrow():
                        self.skip()
                        targets = self.targets()
                        if targets is not None:
                            return RawWiring(start, sources[0], sources[1], step, policy, targets)
        self.pos = start
        return None

    def optional(self, rule: Callable[[], _T | None]) -> _T | None:
        """``(skip rule)?``: the rule after optional whitespace, or nothing read at all."""
        start = self.pos
        self.skip()
        value = rule()
        if value is None:
            self.pos = start
        return value

    def arrow(self) -> bool:
        start = self.pos
        if not self.literal("-"):
            return False
        while True:
            before = self.pos
            self.skip()
            if not self.literal("-"):
                self.pos = before
                break
        self.skip()
        if self.literal(">"):
            return True
        self.pos = start
        return False

    def group(self, item: Callable[[], _T | None]) -> list[_T] | None:
        """``"(" (item ("," item)*)? ")"`` with whitespace between the parts."""
        start = self.pos
        if not self.literal("("):
            return None
        items: list[_T] = []
        self.skip()
        first = item()
        if first is not None:
            items.append(first)
            while True:
                before = self.pos
                self.skip()
                if self.literal(","):
                    self.skip()
                    more = item()
                    if more is not None:
                        items.append(more)
                        continue
                self.pos = before
                break
        self.skip()
        if self.literal(")"):
            return items
        self.pos = start
        return None

    def sources(self) -> tuple[tuple[RawMember, ...], bool] | None:
        members = self.group(self.member)
        if members is not None:
            return tuple(members), True
        alias = self.alias()
        if alias is None:
            return None
        return (RawMember(None, alias, False),), False

    def member(self) -> RawMember | None:
        start = self.pos
        name = self.alias()
        if name is not None:
            self.skip()
            if self.literal("="):
                self.skip()
                value = self.constant()
                if value is not None:
                    return RawMember(name, value, True)
                node = self.alias()
                if node is not None:
                    return RawMember(name, node, False)
            self.pos = start
        value = self.constant()
        if value is not None:
            return RawMember(None, value, True)
        node = self.alias()
        if node is not None:
            return RawMember(None, node, False)
        return None

    def constant(self) -> Span | None:
        start = self.pos
        if self.composite("{", "}", self.pair) or self.composite("[", "]", self.constant):
            return Span(start, self.pos)
        for pattern, what in (
            (_STRING, "a string"),
            (_NUMBER, "a number"),
            (_KEYWORD, "true, false or null"),
        ):
            span = self.token(pattern, what)
            if span is not None:
                return span
        return None

    def composite(self, opening: str, closing: str, item: Callable[[], Span | None]) -> bool:
        start = self.pos
        if not self.literal(opening):
            return False
        if self.depth >= MAX_NESTING:
            raise GrammarError(start, (f"a constant nested at most {MAX_NESTING} deep",))
        self.depth += 1
        try:
            return self._composite_rest(start, closing, item)
        finally:
            self.depth -= 1

    def _composite_rest(self, start: int, closing: str, item: Callable[[], Span | None]) -> bool:
        self.skip()
        if item() is not None:
            while True:
                before = self.pos
                self.skip()
                if self.literal(","):
                    self.skip()
                    if item() is not None:
                        continue
                self.pos = before
                break
        self.skip()
        if self.literal(closing):
            return True
        self.pos = start
        return False

    def pair(self) -> Span | None:
        start = self.pos
        if self.token(_STRING, "a string") is not None:
            self.skip()
            if self.literal(":"):
                self.skip()
                if self.constant() is not None:
                    return Span(start, self.pos)
        self.pos = start
        return None

    def policy(self) -> tuple[RawPolicyEntry, ...] | None:
        start = self.pos
        if not self.literal("{"):
            return None
        entries: list[RawPolicyEntry] = []
        self.skip()
        entry = self.policy_entry()
        if entry is not None:
            entries.append(entry)
            while True:
                before = self.pos
                self.skip()
                if self.literal(","):
                    self.skip()
                    entry = self.policy_entry()
                    if entry is not None:
                        entries.append(entry)
                        continue
                self.pos = before
                break
        self.skip()
        if self.literal("}"):
            return tuple(entries)
        self.pos = start
        return None

    def policy_entry(self) -> RawPolicyEntry | None:
        start = self.pos
        key = self.alias()
        if key is not None:
            self.skip()
            if self.literal("="):
                self.skip()
                number = self.token(_NUMBER, "a number")
                if number is not None:
                    return RawPolicyEntry(key, number, True)
                word = self.alias()
                if word is not None:
                    return RawPolicyEntry(key, word, False)
        self.pos = start
        return None

    def targets(self) -> tuple[RawTarget, ...] | None:
        targets = self.group(self.target)
        if targets is not None:
            return tuple(targets)
        alias = self.alias()
        if alias is None:
            return None
        return (RawTarget(None, alias),)

    def target(self) -> RawTarget | None:
        start = self.pos
        name = self.alias()
        if name is None:
            return None
        self.skip()
        if self.literal("="):
            self.skip()
            node = self.alias()
            if node is not None:
                return RawTarget(name, node)
        self.pos = start
        self.alias()
        return RawTarget(None, name)


def parse_tree(text: str) -> list[RawStatement]:
    """The statements of ``text`` in the order written.

    :raises GrammarError: the text is not machine notation.
    """
    return _Parser(text).program()


def is_name(text: str) -> bool:
    """Whether ``text`` is a name notation can write (an alias or a node)."""
    return _ALIAS.fullmatch(text) is not None
