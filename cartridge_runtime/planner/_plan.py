"""A found plan: its steps for display, its rank key, and its machine (PLAN-14, PLAN-17 ..
PLAN-19).

A :class:`Plan` is an immutable value. Its machine is knitted on first use (through
:class:`~cartridge_runtime.machine.MachineBuilder`, so it is exactly the machine the notation
names) and kept: a user interface can list many plans by their steps and write only the one
chosen as a machine.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from cartridge_runtime.machine import Machine, MachineBuilder, MachineError
from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn

from ._errors import KnitError
from ._graph import FOR_EACH, CapGraph, Edge

__all__ = ("StepKind", "PlanStep", "Plan", "plan_of", "complete_first")

#: How a ForEach step is written in a plan's description.
FOR_EACH_TITLE = "ForEach"


class StepKind(enum.StrEnum):
    """What a plan step does."""

    CAP = "cap"  #: runs a cap
    FOR_EACH = "for_each"  #: turns a sequence into its items (the steps after run per item)


@attrs.frozen(kw_only=True)
class PlanStep:
    """One step of a plan, for display (PLAN-17).

    :ivar kind: a cap step or a ForEach.
    :ivar cap: the cap's URN (``None`` for a ForEach).
    :ivar definition: the cap's definition (``None`` for a ForEach).
    :ivar title: the cap's title, or ``"ForEach"``.
    :ivar input_media: the type the step takes (the cap's ``in=``; for a ForEach, the type
        it iterates).
    :ivar output_media: the type the step leaves (the output taken; for a ForEach, the type of
        one item).
    :ivar input_is_sequence: whether the step takes a sequence.
    :ivar output_is_sequence: whether the step gives a sequence.
    :ivar output_name: the name of the output taken (``None`` for a ForEach).
    :ivar other_output: ``None`` when the step takes the cap's main output (or is a ForEach),
        else the media URN of the other output it takes.
    :ivar per_item: whether the step runs once per item of a sequence a ForEach opened. For
        a one-value source it is the knitted machine's placement; a machine knitted from a
        sequence source takes one value (PLAN-18), so there the plan says more.
    :ivar specificity: the cap URN's specificity (0 for a ForEach).
    :ivar needs: the names of the cap's required arguments, other than its main input, that
        have no default: the knitted machine leaves them unbound, so a run fails
        ``MISSING_INPUT`` unless they are given (PLAN-25).
    """

    kind: StepKind
    cap: CapUrn | None
    definition: CapDef | None = attrs.field(eq=False, repr=False)
    title: str
    input_media: MediaUrn
    output_media: MediaUrn
    input_is_sequence: bool
    output_is_sequence: bool
    output_name: str | None
    other_output: MediaUrn | None
    per_item: bool
    specificity: int
    arg_name: str | None = attrs.field(eq=False, repr=False)
    needs: tuple[str, ...] = ()

    @property
    def is_cap(self) -> bool:
        return self.kind is StepKind.CAP


@attrs.frozen(kw_only=True)
class Plan:
    """One way from the source to the target: steps, rank key, machine (PLAN-17 .. PLAN-19).

    :ivar source: the source media URN as asked (canonical).
    :ivar target: the target media URN as asked (canonical).
    :ivar steps: every step, ForEach steps included, in order.
    """

    source: MediaUrn
    target: MediaUrn
    steps: tuple[PlanStep, ...]

    @property
    def cap_steps(self) -> tuple[PlanStep, ...]:
        """The cap steps, in order (what the machine runs)."""
        return tuple(step for step in self.steps if step.is_cap)

    @property
    def total_steps(self) -> int:
        """Every step, ForEach steps included (what ``max_depth`` bounds)."""
        return len(self.steps)

    @property
    def cap_step_count(self) -> int:
        """The cap steps (the first rank key)."""
        return sum(1 for step in self.steps if step.is_cap)

    @property
    def specificity(self) -> int:
        """The sum of the cap steps' URN specificities (the second rank key)."""
        return sum(step.specificity for step in self.steps)

    @property
    def caps(self) -> tuple[CapUrn, ...]:
        """The cap URN of each cap step, in order."""
        return tuple(step.cap for step in self.steps if step.cap is not None)

    @property
    def rank_key(self) -> tuple[int, int, tuple[str, ...]]:
        """``(cap steps, -specificity, cap URN texts)``: plans sort by it, ascending
        (PLAN-14)."""
        return (self.cap_step_count, -self.specificity, tuple(c.text for c in self.caps))

    @property
    def description(self) -> str:
        """The step titles joined by `` → `` (a ForEach is ``ForEach``)."""
        return " → ".join(step.title for step in self.steps)

    @property
    def needs(self) -> tuple[str, ...]:
        """The required side arguments no step is given, in step order, each named once
        (PLAN-25): a plan that needs none is complete."""
        return tuple(dict.fromkeys(name for step in self.steps for name in step.needs))

    def needs_beyond(self, bound: Collection[str]) -> tuple[str, ...]:
        """:attr:`needs` less the argument names in ``bound`` (those the caller will give)."""
        return tuple(name for name in self.needs if name not in bound)

    def argument_names(self) -> frozenset[str]:
        """Every argument name its cap steps take besides their main inputs: what
        :meth:`machine_with` can bind."""
        return frozenset(
            arg.name
            for step in self.cap_steps
            if step.definition is not None
            for arg in step.definition.args
            if arg.name != step.arg_name
        )

    def machine_with(self, arguments: Mapping[str, Any]) -> Machine:
        """The plan's machine with side arguments bound to constants by name (PLAN-25):
        every cap step with an argument of that name (not its main input) receives it.

        :raises KnitError: a name no step takes, a value that is not a JSON value, or a plan
            that cannot be knitted.
        """
        unknown = sorted(set(arguments) - self.argument_names())
        if unknown:
            takes = ", ".join(sorted(self.argument_names())) or "none"
            raise KnitError(
                f"no step of this plan takes an argument named {', '.join(unknown)} "
                f"(it takes: {takes})",
                kind="UnknownArgumentError",
            )
        return _knit(self.cap_steps, arguments)

    @functools.cached_property
    def machine(self) -> Machine:
        """The plan as a one-strand machine (PLAN-18), knitted on first use.

        :raises KnitError: the plan cannot be knitted (PLAN-19).
        """
        return _knit(self.cap_steps)

    @property
    def knittable(self) -> bool:
        """Whether :attr:`machine` can be built."""
        try:
            self.machine  # noqa: B018
        except KnitError:
            return False
        return True

    def to_notation(self, bracketed: bool = False) -> str:
        """The machine's canonical text, line-based or bracketed (PLAN-19).

        :raises KnitError: the plan cannot be knitted.
        """
        return self.machine.to_notation(bracketed=bracketed)


def _knit(steps: Sequence[PlanStep], arguments: Mapping[str, Any] | None = None) -> Machine:
    """The machine of a plan's cap steps: the strand's input typed by the first cap's
    ``in=``, each step's main input bound to the node before, each output taken by name, and
    each side argument named in ``arguments`` bound to that constant."""
    for step in steps:
        if step.arg_name is None:
            raise KnitError(
                f"cap {step.cap} takes no argument the value before it could feed "
                "(a generator can only start a machine that has no input)",
                kind="UnmatchedSourceInCapArgsError",
            )
    definitions = {step.cap.text: step.definition for step in steps if step.cap is not None}
    builder = MachineBuilder(d for d in definitions.values() if d is not None)
    first = steps[0]
    previous = "n0"
    builder.value(previous, media=first.input_media.text)
    try:
        for index, step in enumerate(steps):
            made = f"n{index + 1}"
            assert step.definition is not None and step.arg_name is not None
            assert step.output_name is not None
            inputs: dict[str, Any] = {step.arg_name: previous}
            for number, arg in enumerate(step.definition.args):
                if arguments and arg.name in arguments and arg.name != step.arg_name:
                    # A value node holds the constant: a text given inline would name a node.
                    constant = f"c{index}_{number}"
                    builder.value(constant, arguments[arg.name])
                    inputs[arg.name] = constant
            builder.step(
                f"s{index}",
                step.definition,
                inputs=inputs,
                outputs={step.output_name: made},
            )
            previous = made
        return builder.build()
    except MachineError as error:
        raise KnitError(f"the plan cannot be knitted: {error.message}", kind=error.kind) from None


def _side_needs(edge: Edge) -> tuple[str, ...]:
    """The required arguments of ``edge``'s cap, other than its main input, with no default."""
    return tuple(
        arg.name
        for arg in edge.cap.args
        if arg.required and arg.default_value is None and arg.name != edge.arg_name
    )


def complete_first(plans: Iterable[Plan], bound: Collection[str] = ()) -> list[Plan]:
    """``plans`` with those that need no argument beyond ``bound`` first, each group in its
    order (a stable sort): what a user picking a plan to run expects (PLAN-25)."""
    return sorted(plans, key=lambda plan: bool(plan.needs_beyond(bound)))


def plan_of(graph: CapGraph, source: MediaUrn, target: MediaUrn, moves: Sequence[int]) -> Plan:
    """The plan of a path given as edge indexes (:data:`FOR_EACH` for a ForEach)."""
    steps: list[PlanStep] = []
    edges = graph.edges
    in_map = False
    item_is_sequence = False  # whether the last cap step's output is a sequence
    position = source
    for move in moves:
        if move == FOR_EACH:
            steps.append(
                PlanStep(
                    kind=StepKind.FOR_EACH,
                    cap=None,
                    definition=None,
                    title=FOR_EACH_TITLE,
                    input_media=position,
                    output_media=position,
                    input_is_sequence=True,
                    output_is_sequence=False,
                    output_name=None,
                    other_output=None,
                    per_item=in_map,
                    specificity=0,
                    arg_name=None,
                )
            )
            in_map = True
            continue
        edge = edges[move]
        # A sequence-input cap inside a map gathers the items (it and what follows run once)
        # when each item is one value; given a sequence made per item, it runs per item on it
        # (MCH-8: a sequence bound to a sequence argument is given whole, in its own scope).
        if in_map and edge.input_is_sequence and not item_is_sequence:
            in_map = False
        item_is_sequence = edge.output_is_sequence
        steps.append(
            PlanStep(
                kind=StepKind.CAP,
                cap=edge.cap_urn,
                definition=edge.cap,
                title=edge.cap.title,
                input_media=edge.source,
                output_media=edge.target,
                input_is_sequence=edge.input_is_sequence,
                output_is_sequence=edge.output_is_sequence,
                output_name=edge.output_name,
                other_output=edge.other_output,
                per_item=in_map,
                specificity=edge.cap_urn.specificity,
                arg_name=edge.arg_name,
                needs=_side_needs(edge),
            )
        )
        position = edge.target
    return Plan(source=source, target=target, steps=tuple(steps))
