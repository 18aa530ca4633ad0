"""Machines in step position: where their text comes from, and how they are written in
(MCH-10).

A header ``alias machine "reference"`` names another machine. A :class:`MachineSource` turns
the reference into text: :class:`MappingMachineSource` from a mapping, :class:`FileMachineSource`
from files (a reference is a path relative to the including file). The included machine is
resolved alone first (where it is included changes nothing about it); then each use of it is
written into the including machine as its steps: an input becomes what the use binds to it,
an output becomes the node that takes it (an output nothing takes is not taken), and a node
inside gets a name no text can write (``alias#use/name``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from cartridge_runtime.urn import CapUrn, MediaUrn

from ..errors import DefinitionError
from ._errors import (
    AmbiguousMachineMembersError,
    MachineError,
    MachineInputBindingError,
    MachineOutputTakenTwiceError,
    PolicyOnMachineError,
    SourceDoesNotConformToMachineInputError,
    UnknownMachineInputError,
    UnknownMachineOutputError,
    UnmatchedMachineMemberError,
    UnnamedMachineTargetError,
)
from ._match import MatchFailure, match_sources
from ._model import Machine
from ._order import conforms
from ._syntax import StepPolicy
from ._types import MachineShape, type_nodes
from ._wiring import CapTable, StepWiring, Value, WiredMember, WiredTarget

__all__ = (
    "LoadedMachine",
    "MachineSourceError",
    "MachineSource",
    "MappingMachineSource",
    "FileMachineSource",
    "IncludedMachine",
    "included_view",
    "write_in_machines",
    "components",
)


@attrs.frozen
class LoadedMachine:
    """A machine's text, and the id its source knows it by (what a circle is seen by, and
    what references inside it are read relative to)."""

    id: str
    text: str


class MachineSourceError(DefinitionError):
    """The source holds no machine under a reference; the message says what it found."""


class MachineSource(Protocol):
    """Where the machines that machine headers name come from."""

    def load(self, reference: str, including: str | None) -> LoadedMachine:
        """The machine ``reference`` names, written in the machine of id ``including`` (None
        for text that came from no place the source knows).

        :raises MachineSourceError: the reference names no machine.
        """
        ...


@attrs.frozen
class MappingMachineSource:
    """Machines held in a mapping, reference → text; the reference is the id."""

    machines: Mapping[str, str]

    def load(self, reference: str, including: str | None) -> LoadedMachine:
        if reference not in self.machines:
            raise MachineSourceError(f'no machine is held under "{reference}"')
        return LoadedMachine(reference, self.machines[reference])


@attrs.frozen
class FileMachineSource:
    """Machines in files: a reference is a path relative to the including file's folder, or to
    ``base`` for text that came from no file. A machine's id is its file's real path."""

    base: Path = attrs.field(factory=Path.cwd, converter=Path)

    def load(self, reference: str, including: str | None) -> LoadedMachine:
        folder = self.base if including is None else Path(including).parent
        path = folder / reference
        try:
            real = os.path.realpath(path, strict=True)
            text = Path(real).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise MachineSourceError(f"{path}: {type(error).__name__}: cannot be read") from None
        return LoadedMachine(real, text)


@attrs.frozen
class IncludedStep:
    cap: CapUrn
    policy: StepPolicy
    members: tuple[tuple[str, Value], ...]  #: (arg name, what it is given)
    targets: tuple[tuple[str, str], ...]  #: (output name, node)
    included_as: tuple[str, ...]


@attrs.frozen
class IncludedMachine:
    """A machine as the machine that includes it sees it: inputs and outputs by the names its
    text wrote, every node's type, and its steps."""

    inputs: tuple[tuple[str, MediaUrn], ...]
    outputs: tuple[tuple[str, MediaUrn], ...]
    node_media: tuple[tuple[str, MediaUrn], ...]
    steps: tuple[IncludedStep, ...]

    def input(self, name: str) -> MediaUrn | None:
        return next((m for n, m in self.inputs if n == name), None)

    def output(self, name: str) -> MediaUrn | None:
        return next((m for n, m in self.outputs if n == name), None)

    def input_names(self) -> list[str]:
        return [n for n, _ in self.inputs]

    def output_names(self) -> list[str]:
        return [n for n, _ in self.outputs]


def included_view(machine: Machine) -> IncludedMachine:
    """What ``machine`` shows a machine that includes it."""
    inputs: list[tuple[str, MediaUrn]] = []
    outputs: list[tuple[str, MediaUrn]] = []
    held: list[tuple[str, MediaUrn]] = []
    steps = []
    for strand in machine.strands:
        label = {node.name: node.label or node.name for node in strand.nodes}
        by_label = sorted(((label[n.name], n.media) for n in strand.nodes), key=lambda p: p[0])
        held.extend(by_label)
        inputs.extend(
            sorted(((label[n], machine.node(n).media) for n in strand.inputs), key=lambda p: p[0])
        )
        outputs.extend(
            sorted(((label[n], machine.node(n).media) for n in strand.outputs), key=lambda p: p[0])
        )
        for step in strand.steps:
            members = tuple(
                (b.arg, Value(constant=b.constant) if b.node is None else Value(node=label[b.node]))
                for b in step.bindings
            )
            targets = tuple((o.output, label[o.node]) for o in step.outputs)
            steps.append(IncludedStep(step.cap, step.policy, members, targets, step.included_as))
    return IncludedMachine(tuple(inputs), tuple(outputs), tuple(held), tuple(steps))


def components(wirings: Sequence[StepWiring]) -> list[list[int]]:
    """The strands of a wiring list: groups of wirings joined by shared node names, in the order
    each first appears, each in the order written."""
    parent = list(range(len(wirings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for index, wiring in enumerate(wirings):
        for node in wiring.nodes():
            if node in first:
                a, b = root(first[node]), root(index)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                first[node] = index
    groups: dict[int, list[int]] = {}
    for index in range(len(wirings)):
        groups.setdefault(root(index), []).append(index)
    return sorted(groups.values(), key=lambda group: group[0])


def _name_targets(wiring: StepWiring, machine: IncludedMachine) -> None:
    if not wiring.policy.is_default:
        raise PolicyOnMachineError(
            f"machine step '{wiring.step}' takes no policy: a policy belongs to its steps"
        )
    taken: set[str] = set()
    for target in wiring.targets:
        if target.name is None:
            continue
        if machine.output(target.name) is None:
            raise UnknownMachineOutputError(
                f"machine step '{wiring.step}' has no output named '{target.name}' (its outputs: "
                f"{', '.join(machine.output_names()) or 'none'})"
            )
        if target.name in taken:
            raise MachineOutputTakenTwiceError(
                f"machine step '{wiring.step}' takes output '{target.name}' twice"
            )
        taken.add(target.name)
    for target in wiring.targets:
        if target.name is None:
            left = [name for name in machine.output_names() if name not in taken]
            if len(left) != 1:
                raise UnnamedMachineTargetError(
                    f"machine step '{wiring.step}': an unnamed target takes the one output left, "
                    f"and {len(left)} are left ({', '.join(left) or 'none'}); name it"
                )
            target.name = left[0]


def _bind_inputs(
    wiring: StepWiring, machine: IncludedMachine, held: Mapping[str, MediaUrn]
) -> dict[str, Value]:
    bound: dict[str, Value] = {}
    for member in wiring.sources:
        if member.name is None:
            continue
        accepts = machine.input(member.name)
        if accepts is None:
            raise UnknownMachineInputError(
                f"machine step '{wiring.step}' has no input named '{member.name}' (its inputs: "
                f"{', '.join(machine.input_names()) or 'none'})"
            )
        if member.name in bound:
            count = sum(1 for other in wiring.sources if other.name == member.name)
            raise MachineInputBindingError(
                f"machine step '{wiring.step}': input '{member.name}' is given {count} times"
            )
        if member.value.node is not None and not conforms(held[member.value.node], accepts):
            raise SourceDoesNotConformToMachineInputError(
                f"machine step '{wiring.step}': node '{member.value.node}' holds "
                f"'{held[member.value.node]}', which does not conform to '{accepts}', what input "
                f"'{member.name}' takes"
            )
        bound[member.name] = member.value
    unnamed = wiring.unnamed_nodes()
    if unnamed:
        free = [(name, urn) for name, urn in machine.inputs if name not in bound]
        sources = [held[node] for node in unnamed]
        try:
            pairs = match_sources(sources, [u for _, u in free], [False] * len(free), None)
        except MatchFailure as failure:
            if failure.undecided is None:
                raise UnmatchedMachineMemberError(
                    f"machine step '{wiring.step}': member '{unnamed[failure.source]}' fits no "
                    "input left for it"
                ) from None
            which = "; ".join(
                f"'{unnamed[s]}' could be {' or '.join(free[a][0] for a in on)}"
                for s, on in failure.undecided
            )
            raise AmbiguousMachineMembersError(
                f"machine step '{wiring.step}': the types do not say which input these members "
                f"are for ({which}); name them"
            ) from None
        placed = [False] * len(unnamed)
        for input_urn, source_urn in pairs:
            at = next(
                i
                for i, (name, urn) in enumerate(free)
                if name not in bound and urn.text == input_urn.text
            )
            which_member = next(
                i
                for i in range(len(unnamed))
                if not placed[i] and sources[i].text == source_urn.text
            )
            placed[which_member] = True
            bound[free[at][0]] = Value(node=unnamed[which_member])
    for name, _ in machine.inputs:
        if name not in bound:
            raise MachineInputBindingError(
                f"machine step '{wiring.step}': input '{name}' is given nothing"
            )
    return bound


def write_in_machines(
    wirings: list[StepWiring],
    caps: CapTable,
    cap_of: dict[str, CapUrn],
    machines: Mapping[str, IncludedMachine],
    included_media: dict[str, MediaUrn],
) -> list[StepWiring]:
    """Write every machine step out as the steps of its machine; ``cap_of`` and
    ``included_media`` gain the steps and inside nodes written in.

    :raises MachineAbstractionError: located at the machine step at fault.
    """
    shapes: Mapping[str, MachineShape] = machines
    for wiring in wirings:
        machine = machines.get(wiring.step)
        if machine is not None:
            try:
                _name_targets(wiring, machine)
            except MachineError as error:
                raise wiring.where.locate(error) from None
    held_of: dict[int, dict[str, MediaUrn]] = {}
    for group in components(wirings):
        if any(wirings[i].step in machines for i in group):
            held = type_nodes([wirings[i] for i in group], caps, cap_of, shapes, included_media)
            for index in group:
                held_of[index] = held
    uses: dict[str, int] = {}
    written: list[StepWiring] = []
    for index, wiring in enumerate(wirings):
        machine = machines.get(wiring.step)
        if machine is None:
            written.append(wiring)
            continue
        try:
            bound = _bind_inputs(wiring, machine, held_of[index])
        except MachineError as error:
            raise wiring.where.locate(error) from None
        taken_by = {t.name: t.node for t in wiring.targets if t.name is not None}
        uses[wiring.step] = uses.get(wiring.step, 0) + 1
        instance = f"{wiring.step}#{uses[wiring.step]}"
        for name, urn in machine.node_media:
            if machine.input(name) is None and name not in taken_by:
                included_media[f"{instance}/{name}"] = urn
        for step_index, step in enumerate(machine.steps):
            alias = f"{instance}/{step_index}"
            cap_of[alias] = step.cap
            members = []
            for arg, value in step.members:
                if value.node is None:
                    given = value
                elif value.node in bound:
                    given = bound[value.node]
                else:
                    given = Value(node=f"{instance}/{value.node}")
                members.append(WiredMember(arg, given))
            targets = []
            for output, node in step.targets:
                if node in taken_by:
                    targets.append(WiredTarget(output, taken_by[node]))
                elif machine.output(node) is None:
                    targets.append(WiredTarget(output, f"{instance}/{node}"))
            written.append(
                StepWiring(
                    sources=members,
                    step=alias,
                    policy=step.policy,
                    targets=targets,
                    where=wiring.where,
                    label=None,
                    included_as=(instance, *step.included_as),
                )
            )
    return written
