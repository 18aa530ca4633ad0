"""Every way a machine can be refused: one root, two families, one class per failure.

The class name of each failure is the reference's error class name for the same failure, and
:attr:`MachineError.kind` says it, so a tool can match refusals across implementations
(``kind == "UnknownCapError"``). ``family`` is ``"syntax"`` (the text alone decides) or
``"abstraction"`` (the caps decide). Each class cites the rule it enforces (``rule``, an id in
``protocol_spec/12-machines.md``). Messages name the statement, its line and column, and the
step alias, node or arg involved; they never quote a constant's value beyond its type.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import DefinitionError

__all__ = (
    "MachineError",
    "MachineSyntaxError",
    "MachineAbstractionError",
    "ParseError",
    "EmptyMachineError",
    "NoEdgesError",
    "InvalidCapUrnError",
    "UndefinedAliasError",
    "AliasNotACapError",
    "DuplicateAliasError",
    "NodeAliasCollisionError",
    "ReservedNodeNameError",
    "UnnamedConstantError",
    "SeveralUnnamedTargetsError",
    "InvalidPolicyError",
    "MachineReferenceWithoutSourceError",
    "UnknownCapError",
    "InvalidMediaUrnError",
    "UnknownArgNameError",
    "UnknownOutputNameError",
    "NoMainOutputError",
    "OutputTakenTwiceError",
    "NodeMediaConflictError",
    "UntypedMachineInputError",
    "SourceDoesNotConformToArgError",
    "ConstantFailsValidationError",
    "ArgBoundTwiceError",
    "UnmatchedSourceInCapArgsError",
    "AmbiguousMachineNotationError",
    "MainInputUnboundError",
    "CapDoesNotDeclareInputError",
    "CyclicMachineStrandError",
    "UnknownMachineReferenceError",
    "CyclicMachineReferenceError",
    "InvalidIncludedMachineError",
    "PolicyOnMachineError",
    "UnknownMachineInputError",
    "UnknownMachineOutputError",
    "MachineInputBindingError",
    "MachineOutputTakenTwiceError",
    "UnnamedMachineTargetError",
    "UntypedMachineMemberError",
    "UnmatchedMachineMemberError",
    "AmbiguousMachineMembersError",
    "SourceDoesNotConformToMachineInputError",
)


class MachineError(DefinitionError):
    """A machine text or value that is refused.

    :ivar kind: the reference's error class name for this failure (the class name).
    :ivar message: what is wrong, without the location prefix.
    :ivar statement: the index of the statement at fault among the text's statements, or
        ``None`` when no single statement is.
    :ivar line: 1-based line of that statement (or of the offending token), or ``None``.
    :ivar column: 1-based column, or ``None``.
    """

    family: ClassVar[str] = "abstraction"
    rule: ClassVar[str] = "MCH-1"

    def __init__(
        self,
        message: str,
        *,
        statement: int | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.statement = statement
        self.line = line
        self.column = column
        super().__init__(message)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def located(self, statement: int | None, line: int | None, column: int | None) -> MachineError:
        """This error with a location, where it had none (the first location given wins)."""
        if self.line is None:
            self.statement, self.line, self.column = statement, line, column
        return self

    def __str__(self) -> str:
        where: list[str] = []
        if self.statement is not None:
            where.append(f"statement {self.statement + 1}")
        if self.line is not None:
            where.append(f"line {self.line}, column {self.column}")
        prefix = f"{', '.join(where)}: " if where else ""
        return f"{prefix}{self.message} [{self.rule}]"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.message, self.statement, self.line, self.column))


def _rebuild(
    cls: type[MachineError],
    message: str,
    statement: int | None,
    line: int | None,
    column: int | None,
) -> MachineError:
    error = cls.__new__(cls)
    MachineError.__init__(error, message, statement=statement, line=line, column=column)
    return error


class MachineSyntaxError(MachineError):
    """The text alone is wrong: grammar, names, headers, policies."""

    family = "syntax"


class MachineAbstractionError(MachineError):
    """The text reads, but the caps it names do not fit it."""


# -- syntax -------------------------------------------------------------------------------


class ParseError(MachineSyntaxError):
    """The text is not machine notation."""

    rule = "MCH-1"


class EmptyMachineError(MachineSyntaxError):
    """The text has no statement."""

    rule = "MCH-1"


class NoEdgesError(MachineSyntaxError):
    """The text has headers but no wiring."""

    rule = "MCH-1"


class ReservedNodeNameError(MachineSyntaxError):
    """``true``, ``false`` or ``null`` written where a node goes."""

    rule = "MCH-2"


class UnnamedConstantError(MachineSyntaxError):
    """A constant that names no arg."""

    rule = "MCH-2"


class SeveralUnnamedTargetsError(MachineSyntaxError):
    """More than one target takes the main output."""

    rule = "MCH-6"


class InvalidPolicyError(MachineSyntaxError):
    """A step policy with an unknown key, a key twice, or a value it does not take."""

    rule = "MCH-9"


class InvalidCapUrnError(MachineSyntaxError):
    """A cap header whose URN does not parse."""

    rule = "MCH-3"


class DuplicateAliasError(MachineSyntaxError):
    """Two headers declare one alias."""

    rule = "MCH-3"


class UndefinedAliasError(MachineSyntaxError):
    """A wiring's step is no header's alias."""

    rule = "MCH-3"


class AliasNotACapError(MachineSyntaxError):
    """A step alias given by the alias table names something that is not a cap URN."""

    rule = "MCH-3"


class NodeAliasCollisionError(MachineSyntaxError):
    """A node bears the name of a step."""

    rule = "MCH-3"


class MachineReferenceWithoutSourceError(MachineSyntaxError):
    """A machine header, read with nothing to resolve machine references against."""

    rule = "MCH-10"


class InvalidMediaUrnError(MachineSyntaxError):
    """A cap's ``in=`` or ``out=`` is not a media URN."""

    rule = "MCH-5"


# -- abstraction --------------------------------------------------------------------------


class UnknownCapError(MachineAbstractionError):
    """A header's cap URN is none of the caps given."""

    rule = "MCH-3"


class UnknownArgNameError(MachineAbstractionError):
    """A member names an arg the cap does not declare."""

    rule = "MCH-4"


class UnknownOutputNameError(MachineAbstractionError):
    """A target names an output the cap does not declare."""

    rule = "MCH-6"


class NoMainOutputError(MachineAbstractionError):
    """An unnamed target on a cap that declares no main output."""

    rule = "MCH-6"


class OutputTakenTwiceError(MachineAbstractionError):
    """One output taken by two targets of a wiring."""

    rule = "MCH-6"


class NodeMediaConflictError(MachineAbstractionError):
    """A node given two media URNs that are not on one specialization chain."""

    rule = "MCH-5"


class UntypedMachineInputError(MachineAbstractionError):
    """Unnamed members that nothing gives a media URN."""

    rule = "MCH-5"


class SourceDoesNotConformToArgError(MachineAbstractionError):
    """A named member whose node does not conform to what the arg accepts."""

    rule = "MCH-4"


class ConstantFailsValidationError(MachineAbstractionError):
    """A constant the arg's media definition does not accept."""

    rule = "MCH-4"


class ArgBoundTwiceError(MachineAbstractionError):
    """An arg that takes one value named by several members."""

    rule = "MCH-4"


class UnmatchedSourceInCapArgsError(MachineAbstractionError):
    """An unnamed member that fits no arg left for it."""

    rule = "MCH-4"


class AmbiguousMachineNotationError(MachineAbstractionError):
    """The types leave more than one way to bind the unnamed members."""

    rule = "MCH-4"


class MainInputUnboundError(MachineAbstractionError):
    """A cap that takes an input, given none for it."""

    rule = "MCH-4"


class CapDoesNotDeclareInputError(MachineAbstractionError):
    """A cap whose ``in=`` is no arg's stdin source."""

    rule = "MCH-4"


class CyclicMachineStrandError(MachineAbstractionError):
    """Steps that wait on one another."""

    rule = "MCH-8"


# -- machines in step position ------------------------------------------------------------


class UnknownMachineReferenceError(MachineAbstractionError):
    """A machine header whose reference the source does not hold."""

    rule = "MCH-10"


class CyclicMachineReferenceError(MachineAbstractionError):
    """A machine that includes itself, directly or through others."""

    rule = "MCH-10"


class InvalidIncludedMachineError(MachineAbstractionError):
    """An included machine that is itself refused; ``cause`` says why."""

    rule = "MCH-10"

    cause: MachineError | None = None


class PolicyOnMachineError(MachineAbstractionError):
    """A step policy on a machine step."""

    rule = "MCH-10"


class UnknownMachineInputError(MachineAbstractionError):
    """A member names an input the included machine does not have."""

    rule = "MCH-10"


class UnknownMachineOutputError(MachineAbstractionError):
    """A target names an output the included machine does not have."""

    rule = "MCH-10"


class MachineInputBindingError(MachineAbstractionError):
    """An input of an included machine bound more than once, or not at all."""

    rule = "MCH-10"


class MachineOutputTakenTwiceError(MachineAbstractionError):
    """An output of an included machine taken twice."""

    rule = "MCH-10"


class UnnamedMachineTargetError(MachineAbstractionError):
    """An unnamed target on a machine step that leaves other than one output."""

    rule = "MCH-10"


class UntypedMachineMemberError(MachineAbstractionError):
    """An unnamed member of a machine step with no media URN to match by."""

    rule = "MCH-10"


class UnmatchedMachineMemberError(MachineAbstractionError):
    """An unnamed member of a machine step that fits no input left."""

    rule = "MCH-10"


class AmbiguousMachineMembersError(MachineAbstractionError):
    """Unnamed members of a machine step the types do not place."""

    rule = "MCH-10"


class SourceDoesNotConformToMachineInputError(MachineAbstractionError):
    """A named member whose node does not conform to the included machine's input."""

    rule = "MCH-10"
