"""Resolving one strand: every step's args bound, its outputs taken, its steps in canonical
order (MCH-4, MCH-6, MCH-8, MCH-11).

A strand is a connected component of wirings (two wirings share a strand when a path of shared
node names joins them). Its nodes are numbered in the order the text first names them; two
names stay two nodes even when they hold one URN. The steps come out in the canonical order:
a topological order of the data flow that, among the steps ready together, takes the smallest
by (cap URN, bindings, outputs, per-item flag), ties kept in the order written.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn

from ._constant import constant_text
from ._errors import (
    AmbiguousMachineNotationError,
    ArgBoundTwiceError,
    CapDoesNotDeclareInputError,
    CyclicMachineStrandError,
    MachineError,
    MainInputUnboundError,
    NoMainOutputError,
    OutputTakenTwiceError,
    SourceDoesNotConformToArgError,
    UnknownArgNameError,
    UnknownOutputNameError,
    UnmatchedSourceInCapArgsError,
)
from ._iteration import CyclicSteps, MemberShape, StepShape, place_steps
from ._match import MatchFailure, match_sources
from ._media import MediaTable
from ._order import cap_key, conforms, equivalent, media, media_key
from ._syntax import StepPolicy
from ._wiring import CapShape, CapTable, StepWiring, Where

__all__ = (
    "ResolvedBinding",
    "ResolvedOutput",
    "ResolvedStep",
    "ResolvedStrand",
    "resolve_strand",
    "step_shapes",
)


@attrs.frozen
class ResolvedBinding:
    slot: MediaUrn  #: the arg's own media URN: its identity
    arg: str
    node: int | None  #: the node id, or None for a constant
    constant: Any = None


@attrs.frozen
class ResolvedOutput:
    media: MediaUrn
    name: str
    node: int


@attrs.frozen
class ResolvedStep:
    cap: CapUrn
    definition: CapDef
    bindings: tuple[ResolvedBinding, ...]
    outputs: tuple[ResolvedOutput, ...]
    policy: StepPolicy
    is_loop: bool
    label: str | None
    included_as: tuple[str, ...]
    where: Where | None

    def source_nodes(self) -> list[int]:
        return [b.node for b in self.bindings if b.node is not None]

    def output_nodes(self) -> list[int]:
        return [o.node for o in self.outputs]


@attrs.frozen
class ResolvedStrand:
    nodes: tuple[MediaUrn, ...]
    is_sequence: tuple[bool, ...]
    labels: tuple[str | None, ...]
    steps: tuple[ResolvedStep, ...]  #: canonical order


def _declared(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names) or "none"


def _outputs(
    wiring: StepWiring,
    cap: CapUrn,
    definition: CapDef,
    ids: Mapping[str, int],
    is_sequence: list[bool],
) -> tuple[ResolvedOutput, ...]:
    taken: list[ResolvedOutput] = []
    for target in wiring.targets:
        if target.name is None:
            output = definition.main_output()
            if output is None:
                raise NoMainOutputError(
                    f"step '{wiring.label or wiring.step}': cap '{cap}' declares no main "
                    "output; name the output the target takes (output=node)"
                )
        else:
            output = definition.output_named(target.name)
            if output is None:
                raise UnknownOutputNameError(
                    f"cap '{cap}' has no output named '{target.name}' (its outputs: "
                    f"{_declared([o.name for o in definition.outputs])})"
                )
        urn = media(output.media_urn)
        if any(equivalent(t.media, urn) for t in taken):
            raise OutputTakenTwiceError(
                f"step '{wiring.label or wiring.step}' takes output '{output.name}' twice"
            )
        node = ids[target.node]
        is_sequence[node] = output.is_sequence
        taken.append(ResolvedOutput(urn, output.name, node))
    taken.sort(key=lambda o: media_key(o.media))
    return tuple(taken)


def _bind(
    wiring: StepWiring,
    cap: CapUrn,
    definition: CapDef,
    shape: CapShape,
    nodes: Sequence[MediaUrn],
    ids: Mapping[str, int],
    media: MediaTable | None,
) -> list[ResolvedBinding]:
    args = definition.args
    step = wiring.label or wiring.step
    primary = shape.primary
    if shape.has_input and primary is None:
        raise CapDoesNotDeclareInputError(
            f"step '{step}': cap '{cap}' takes in={cap.in_spec} but no arg has it as its stdin "
            "source"
        )
    accepts, slots = shape.accepts, shape.slots
    bindings: list[ResolvedBinding] = []
    named = [0] * len(args)
    for member in wiring.sources:
        if member.name is None:
            continue
        index = shape.by_name.get(member.name)
        if index is None:
            raise UnknownArgNameError(
                f"cap '{cap}' has no arg named '{member.name}' (its args: "
                f"{_declared([a.name for a in args])})"
            )
        node: int | None = None
        if member.value.node is None and media is not None:
            media.check(step, args[index].name, args[index].media_urn, member.value.constant)
        if member.value.node is not None:
            node = ids[member.value.node]
            if not conforms(nodes[node], accepts[index]):
                raise SourceDoesNotConformToArgError(
                    f"step '{step}': node '{member.value.node}' holds '{nodes[node]}', which "
                    f"does not conform to '{accepts[index]}', what arg '{member.name}' accepts"
                )
        named[index] += 1
        bindings.append(
            ResolvedBinding(slots[index], args[index].name, node, member.value.constant)
        )
    for index, count in enumerate(named):
        if count > 1 and not args[index].is_sequence:
            raise ArgBoundTwiceError(
                f"step '{step}': arg '{args[index].name}' takes one value but {count} members "
                "name it"
            )
    free = [i for i in range(len(args)) if named[i] == 0]
    unnamed = [ids[n] for n in wiring.unnamed_nodes()]
    if unnamed:
        sources = [nodes[n] for n in unnamed]
        free_accepts = [accepts[i] for i in free]
        must_bind = free.index(primary) if primary in free else None
        try:
            matched = match_sources(
                sources, free_accepts, [args[i].is_sequence for i in free], must_bind
            )
        except MatchFailure as failure:
            if failure.undecided is None:
                raise UnmatchedSourceInCapArgsError(
                    f"step '{step}': member '{wiring.unnamed_nodes()[failure.source]}' "
                    f"('{sources[failure.source]}') fits no arg of cap '{cap}' left for it"
                ) from None
            names = wiring.unnamed_nodes()
            which = "; ".join(
                f"'{names[s]}' could be {' or '.join(repr(args[free[a]].name) for a in on)}"
                for s, on in failure.undecided
            )
            raise AmbiguousMachineNotationError(
                f"step '{step}': the types do not say which arg these members are for ({which}); "
                "name them (arg=node)"
            ) from None
        consumed = [False] * len(unnamed)
        for arg_urn, source_urn in matched:
            at = next(i for i, a in enumerate(free_accepts) if equivalent(a, arg_urn))
            position = next(
                p
                for p, n in enumerate(unnamed)
                if not consumed[p] and equivalent(nodes[n], source_urn)
            )
            consumed[position] = True
            bindings.append(
                ResolvedBinding(slots[free[at]], args[free[at]].name, unnamed[position])
            )
    bindings.sort(key=lambda b: media_key(b.slot))
    if primary is not None and not any(equivalent(b.slot, slots[primary]) for b in bindings):
        raise MainInputUnboundError(
            f"step '{step}': cap '{cap}' takes its main input '{args[primary].name}' and no member "
            "gives it"
        )
    return bindings


def step_shapes(steps: Sequence[ResolvedStep], is_sequence: Sequence[bool]) -> list[StepShape]:
    """What each step is given and makes, as iteration sees it."""
    takes_sequence: dict[tuple[int, str], bool] = {}  # (definition, slot) -> the arg's flag
    shapes = []
    for step in steps:
        members = []
        for binding in step.bindings:
            if binding.node is None:
                continue
            key = (id(step.definition), binding.slot.text)
            if key not in takes_sequence:
                takes_sequence[key] = next(
                    arg.is_sequence
                    for arg in step.definition.args
                    if equivalent(media(arg.media_urn), binding.slot)
                )
            members.append(MemberShape(binding.node, takes_sequence[key]))
        outputs = tuple((o.node, is_sequence[o.node]) for o in step.outputs)
        shapes.append(StepShape(tuple(members), outputs))
    return shapes


def _order_key(step: ResolvedStep, nodes: Sequence[MediaUrn]) -> tuple[Any, ...]:
    bindings = tuple(
        (media_key(b.slot), True, constant_text(b.constant))
        if b.node is None
        else (media_key(b.slot), False, media_key(nodes[b.node]))
        for b in step.bindings
    )
    outputs = tuple((media_key(o.media), media_key(nodes[o.node])) for o in step.outputs)
    return (cap_key(step.cap), bindings, outputs, step.is_loop)


def _canonical_order(steps: Sequence[ResolvedStep], nodes: Sequence[MediaUrn]) -> list[int]:
    makers: dict[int, list[int]] = {}
    for index, step in enumerate(steps):
        for node in step.output_nodes():
            makers.setdefault(node, []).append(index)
    waiting = [0] * len(steps)
    after: list[list[int]] = [[] for _ in steps]
    for index, step in enumerate(steps):
        for node in step.source_nodes():
            for maker in makers.get(node, ()):
                after[maker].append(index)
                waiting[index] += 1
    keys = [_order_key(step, nodes) for step in steps]
    # The smallest key first; among equal keys, the one that became ready first (and, at the
    # start, the one written first): a stable sort of the ready list, without re-sorting it.
    ready = [(keys[i], i, i) for i in range(len(steps)) if not waiting[i]]
    heapq.heapify(ready)
    arrived = len(steps)
    order = []
    while ready:
        _, _, index = heapq.heappop(ready)
        order.append(index)
        for successor in after[index]:
            waiting[successor] -= 1
            if not waiting[successor]:
                heapq.heappush(ready, (keys[successor], arrived, successor))
                arrived += 1
    return order


def resolve_strand(
    wirings: Sequence[StepWiring],
    held: Mapping[str, MediaUrn],
    caps: CapTable,
    cap_of: Mapping[str, CapUrn],
) -> ResolvedStrand:
    """Resolve the wirings of one strand, whose nodes :func:`type_nodes` typed.

    :raises MachineAbstractionError: located at the wiring at fault.
    """
    ids: dict[str, int] = {}
    nodes: list[MediaUrn] = []
    for wiring in wirings:
        for name in [m.value.node for m in wiring.sources if m.value.node is not None] + [
            t.node for t in wiring.targets
        ]:
            if name not in ids:
                ids[name] = len(nodes)
                nodes.append(held[name])
    labels: list[str | None] = [None] * len(nodes)
    for name, node in ids.items():
        labels[node] = name
    is_sequence = [False] * len(nodes)
    outputs = []
    for wiring in wirings:
        cap = cap_of[wiring.step]
        try:
            outputs.append(_outputs(wiring, cap, caps.get(cap), ids, is_sequence))
        except MachineError as error:
            raise wiring.where.locate(error) from None
    steps = []
    for wiring, taken in zip(wirings, outputs, strict=True):
        cap = cap_of[wiring.step]
        definition = caps.get(cap)
        try:
            bindings = _bind(wiring, cap, definition, caps.shape(cap), nodes, ids, caps.media)
        except MachineError as error:
            raise wiring.where.locate(error) from None
        steps.append(
            ResolvedStep(
                cap,
                definition,
                tuple(bindings),
                taken,
                wiring.policy,
                False,
                wiring.label,
                wiring.included_as,
                wiring.where,
            )
        )
    try:
        iteration = place_steps(step_shapes(steps, is_sequence))
    except CyclicSteps as cyclic:
        names = ", ".join(f"'{steps[i].label or wirings[i].step}'" for i in cyclic.steps)
        raise wirings[cyclic.steps[0]].where.locate(
            CyclicMachineStrandError(f"steps {names} wait on one another")
        ) from None
    steps = [
        attrs.evolve(step, is_loop=p.maps)
        for step, p in zip(steps, iteration.placements, strict=True)
    ]
    order = _canonical_order(steps, nodes)
    return ResolvedStrand(
        tuple(nodes), tuple(is_sequence), tuple(labels), tuple(steps[i] for i in order)
    )
