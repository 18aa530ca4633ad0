"""The statements of a machine text: what each one says, with where it stands (MCH-1, MCH-2).

:func:`read_statements` reads the grammar's tree (:mod:`._grammar`) into immutable
statements and applies the rules the text alone decides: reserved words are not node names,
a constant names its arg, a wiring takes the main output once, a policy has known keys. It
knows no cap: whether a name exists is the resolver's question.
"""

from __future__ import annotations

import bisect
import enum
import re
from typing import Any, Final

import attrs

from ._constant import decode_constant
from ._errors import (
    InvalidPolicyError,
    ParseError,
    ReservedNodeNameError,
    SeveralUnnamedTargetsError,
    UnnamedConstantError,
)
from ._grammar import GrammarError, RawHeader, RawMachineHeader, RawWiring, Span, parse_tree

__all__ = (
    "OnError",
    "StepPolicy",
    "Member",
    "WiringTarget",
    "Wiring",
    "StatementKind",
    "Statement",
    "read_statements",
    "RESERVED_NODE_NAMES",
    "MAX_RETRY",
)

#: Words notation reads as constants: no node may bear one (MCH-2).
RESERVED_NODE_NAMES: Final = frozenset({"true", "false", "null"})
#: The most further attempts a policy may ask for (an unsigned 32-bit count).
MAX_RETRY: Final = 0xFFFF_FFFF


class OnError(enum.StrEnum):
    """What a failure that stands (after its retries) does to the run (MCH-9)."""

    FAIL = "fail"  #: the run fails (the default)
    ABSENT = "absent"  #: the item is absent downstream, like an optional output that did not fire


@attrs.frozen(kw_only=True)
class StepPolicy:
    """A step's policy: further attempts for a retryable failure, and what a standing failure
    does (MCH-9)."""

    retry: int = 0
    on_error: OnError = OnError.FAIL
    #: ``cache=false``: a run with a step cache never looks this step up nor stores it.
    cache: bool = True

    @property
    def is_default(self) -> bool:
        return self.retry == 0 and self.on_error is OnError.FAIL and self.cache

    def to_notation(self) -> str:
        """``{retry=3}``, ``{on_error=absent}``, ``{cache=false}``, in that order, or ``""``."""
        entries = []
        if self.retry:
            entries.append(f"retry={self.retry}")
        if self.on_error is OnError.ABSENT:
            entries.append("on_error=absent")
        if not self.cache:
            entries.append("cache=false")
        return "{" + ", ".join(entries) + "}" if entries else ""


@attrs.frozen(kw_only=True)
class Member:
    """One member of a wiring's sources: a node or a constant, under the arg it names."""

    name: str | None
    node: str | None  #: the node's name; ``None`` for a constant
    constant: Any = None
    line: int
    column: int

    @property
    def is_constant(self) -> bool:
        return self.node is None


@attrs.frozen(kw_only=True)
class WiringTarget:
    """One target of a wiring: the output it names (``None``: the main output) and its node."""

    name: str | None
    node: str
    line: int
    column: int


@attrs.frozen(kw_only=True)
class Wiring:
    """``sources -> step{policy} -> targets``: one invocation."""

    sources: tuple[Member, ...]
    step: str
    policy: StepPolicy
    targets: tuple[WiringTarget, ...]


class StatementKind(enum.StrEnum):
    CAP_HEADER = "cap_header"
    MACHINE_HEADER = "machine_header"
    WIRING = "wiring"


@attrs.frozen(kw_only=True)
class Statement:
    """One statement, at ``position`` among the text's statements, starting at ``line``,
    ``column``."""

    kind: StatementKind
    position: int
    line: int
    column: int
    alias: str = ""  #: a header's alias
    cap_urn: str = ""  #: a cap header's URN text, as written
    reference: str = ""  #: a machine header's reference, unescaped
    wiring: Wiring | None = None


_LINE_END: Final = re.compile(r"\r\n|\n|\r")


class _Lines:
    """Offsets to 1-based line and column."""

    def __init__(self, text: str) -> None:
        # A line ends at LF, CR LF or a lone CR.
        self._starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def at(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = _Lines(text)

    def word(self, span: Span) -> str:
        return self.text[span.start : span.end]

    def node(self, span: Span, position: int) -> str:
        name = self.word(span)
        if name in RESERVED_NODE_NAMES:
            line, column = self.lines.at(span.start)
            raise ReservedNodeNameError(
                f"'{name}' is a constant, not a node name",
                statement=position,
                line=line,
                column=column,
            )
        return name

    def constant(self, span: Span, position: int) -> Any:
        text = self.word(span).strip()
        try:
            return decode_constant(text)
        except ValueError as error:
            line, column = self.lines.at(span.start)
            raise ParseError(
                f"a constant is not a JSON value: {error}",
                statement=position,
                line=line,
                column=column,
            ) from None

    def policy(self, raw: RawWiring, step: str, position: int) -> StepPolicy:
        retry, on_error, cache = 0, OnError.FAIL, True
        seen: set[str] = set()
        for entry in raw.policy or ():
            key, value = self.word(entry.key), self.word(entry.value)
            line, column = self.lines.at(entry.key.start)

            def refused(why: str, line: int = line, column: int = column) -> InvalidPolicyError:
                return InvalidPolicyError(
                    f"step '{step}': {why}", statement=position, line=line, column=column
                )

            if key in seen:
                raise refused(f"'{key}' is given twice")
            if key == "retry":
                if not (entry.is_number and value.isascii() and value.isdigit()):
                    raise refused(f"retry takes a whole number of further attempts, not '{value}'")
                if int(value) > MAX_RETRY:
                    raise refused(f"retry takes at most {MAX_RETRY} further attempts")
                retry = int(value)
            elif key == "on_error":
                if value != OnError.ABSENT.value:
                    raise refused(f"on_error takes 'absent', not '{value}'")
                on_error = OnError.ABSENT
            elif key == "cache":
                if value not in ("true", "false"):
                    raise refused(f"cache takes 'true' or 'false', not '{value}'")
                cache = value == "true"
            else:
                raise refused(f"unknown key '{key}' (a policy takes retry, on_error and cache)")
            seen.add(key)
        return StepPolicy(retry=retry, on_error=on_error, cache=cache)

    def wiring(self, raw: RawWiring, position: int) -> Wiring:
        sources = []
        for member in raw.sources:
            line, column = self.lines.at(member.value.start)
            name = self.word(member.name) if member.name is not None else None
            if member.is_constant:
                if name is None:
                    raise UnnamedConstantError(
                        "a constant must name the arg it is for (name=value)",
                        statement=position,
                        line=line,
                        column=column,
                    )
                value = self.constant(member.value, position)
                sources.append(
                    Member(name=name, node=None, constant=value, line=line, column=column)
                )
            else:
                node = self.node(member.value, position)
                sources.append(Member(name=name, node=node, line=line, column=column))
        step = self.word(raw.step)
        policy = self.policy(raw, step, position)
        targets = []
        for target in raw.targets:
            line, column = self.lines.at(target.node.start)
            name = self.word(target.name) if target.name is not None else None
            node = self.node(target.node, position)
            targets.append(WiringTarget(name=name, node=node, line=line, column=column))
        unnamed = [t for t in targets if t.name is None]
        if len(unnamed) > 1:
            names = ", ".join(f"'{t.node}'" for t in unnamed)
            raise SeveralUnnamedTargetsError(
                f"step '{step}': only one target takes the main output; name the others "
                f"(output=node): {names}",
                statement=position,
                line=unnamed[1].line,
                column=unnamed[1].column,
            )
        return Wiring(sources=tuple(sources), step=step, policy=policy, targets=tuple(targets))


#: An arrow written without a space on one side (``a->b``, ``a ->b``).
_GLUED_ARROW: Final = re.compile(r"[^\s]->|->[^\s]")


def read_statements(text: str) -> list[Statement]:
    """The statements of ``text`` in the order written.

    :raises ParseError: the text is not machine notation (with the line and column where
        reading stopped and what was expected there).
    :raises MachineSyntaxError: a rule the text alone decides is broken.
    """
    reader = _Reader(text)
    try:
        tree = parse_tree(text)
    except GrammarError as error:
        line, column = reader.lines.at(error.offset)
        found = text[error.offset : error.offset + 1]
        what = f"found {found!r}" if found else "found the end of the text"
        lines = text.splitlines()
        hint = ""
        if line <= len(lines) and _GLUED_ARROW.search(lines[line - 1]):
            hint = "; put spaces around '->' (a name may hold '-', so 'a->b' reads as one name)"
        raise ParseError(
            f"expected {' or '.join(error.expected)}; {what}{hint}", line=line, column=column
        ) from None
    statements = []
    for position, raw in enumerate(tree):
        line, column = reader.lines.at(raw.start)
        if isinstance(raw, RawHeader):
            statement = Statement(
                kind=StatementKind.CAP_HEADER,
                alias=reader.word(raw.alias),
                cap_urn=reader.word(raw.cap_urn),
                position=position,
                line=line,
                column=column,
            )
        elif isinstance(raw, RawMachineHeader):
            reference = reader.constant(raw.reference, position)
            assert isinstance(reference, str)  # the grammar read a JSON string
            statement = Statement(
                kind=StatementKind.MACHINE_HEADER,
                alias=reader.word(raw.alias),
                reference=reference,
                position=position,
                line=line,
                column=column,
            )
        else:
            statement = Statement(
                kind=StatementKind.WIRING,
                wiring=reader.wiring(raw, position),
                position=position,
                line=line,
                column=column,
            )
        statements.append(statement)
    return statements
