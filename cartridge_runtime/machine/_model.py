"""The resolved machine: an immutable graph of typed nodes and steps (MCH-7, MCH-11).

A :class:`Machine` is a tuple of strands (connected components, in the order the text first
wrote each). Its steps come in canonical order and are named ``edge_0``, ``edge_1``, ... across
all strands; its nodes are named ``n0``, ``n1``, ... in the order that walk first meets them
(each step's bound nodes, then its outputs). Names the text wrote survive as ``label`` and are
never part of what a machine *is*: two machines are equal (``==``) when their steps match one
for one in cap, policy, bindings (arg, node type or constant) and outputs, through one pairing
of their nodes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn

from ._constant import constants_equal
from ._iteration import place_steps
from ._strand import ResolvedStrand, step_shapes
from ._syntax import StepPolicy

__all__ = (
    "Node",
    "Binding",
    "TakenOutput",
    "StepPlacement",
    "Step",
    "Strand",
    "Machine",
    "build_machine",
)


@attrs.frozen(kw_only=True)
class Node:
    """A value of the machine.

    :ivar name: the canonical name (``n0``...).
    :ivar label: the name the text (or the builder) gave it, or None for a node written in
        from an included machine.
    :ivar media: the media URN it holds.
    :ivar is_sequence: whether the output that makes it is declared a sequence (as seen in the
        scope it lives in); an input of the machine is one value.
    :ivar strand: the index of its strand.
    :ivar scope: the scope it lives in (0: the machine; otherwise a map of its strand).
    """

    name: str
    label: str | None = attrs.field(eq=False)
    media: MediaUrn
    is_sequence: bool
    strand: int
    scope: int


@attrs.frozen(kw_only=True)
class Binding:
    """What feeds one arg of a step: a node (by canonical name) or a constant."""

    arg: str  #: the arg's name in the cap definition
    arg_media: MediaUrn  #: the arg's media URN, its identity
    node: str | None = None
    constant: Any = None

    @property
    def is_constant(self) -> bool:
        return self.node is None


@attrs.frozen(kw_only=True)
class TakenOutput:
    """An output of a step its wiring takes, and the node it goes to."""

    output: str
    media: MediaUrn
    node: str
    optional: bool
    is_sequence: bool


@attrs.frozen(kw_only=True)
class StepPlacement:
    """Where a step runs (MCH-8).

    :ivar placed_in: the scope it is given its members in.
    :ivar map: the map it runs once per item in, when it maps (``is_loop``).
    :ivar mapped: the nodes it maps over, zipped.
    """

    placed_in: int
    map: int | None
    mapped: tuple[str, ...]

    @property
    def maps(self) -> bool:
        return self.map is not None

    @property
    def scope(self) -> int:
        return self.map if self.map is not None else self.placed_in

    @property
    def per_item(self) -> bool:
        """Whether the step runs once per item: it maps, or sits inside a map."""
        return self.scope != 0


@attrs.frozen(kw_only=True)
class Step:
    """One invocation of a cap.

    :ivar alias: the canonical name (``edge_0``...); :ivar label: the alias the text gave it.
    :ivar included_as: the machine steps it came in through, outermost first (``sub#1``).
    """

    alias: str
    label: str | None = attrs.field(eq=False)
    cap: CapUrn
    definition: CapDef = attrs.field(eq=False, repr=False)
    bindings: tuple[Binding, ...]
    outputs: tuple[TakenOutput, ...]
    policy: StepPolicy
    placement: StepPlacement
    strand: int
    included_as: tuple[str, ...] = attrs.field(eq=False)

    @property
    def is_loop(self) -> bool:
        """Whether the step opens or joins a map (runs once per item of what it maps)."""
        return self.placement.maps

    @property
    def input_nodes(self) -> tuple[str, ...]:
        return tuple(b.node for b in self.bindings if b.node is not None)

    @property
    def output_nodes(self) -> tuple[str, ...]:
        return tuple(o.node for o in self.outputs)


@attrs.frozen(kw_only=True)
class Strand:
    """A connected component of the machine."""

    index: int
    steps: tuple[Step, ...]
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]  #: nodes no step makes
    outputs: tuple[str, ...]  #: nodes no step is given
    scope_parents: tuple[int, ...]  #: the parent of every scope; scope 0 is the machine
    scope_sources: tuple[tuple[str, ...], ...]  #: the nodes each map zips (none for scope 0)


@attrs.frozen(eq=False)
class Machine:
    """A resolved machine. Build one with :func:`parse_machine` or :class:`MachineBuilder`."""

    strands: tuple[Strand, ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(step for strand in self.strands for step in strand.steps)

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(node for strand in self.strands for node in strand.nodes)

    @property
    def inputs(self) -> tuple[Node, ...]:
        """The nodes no step makes: what a run is given."""
        return tuple(self.node(n) for strand in self.strands for n in strand.inputs)

    @property
    def outputs(self) -> tuple[Node, ...]:
        """The nodes no step is given: what a run gives back."""
        return tuple(self.node(n) for strand in self.strands for n in strand.outputs)

    def node(self, name: str) -> Node:
        """The node of canonical name ``name``, or of the label ``name`` the text gave it.

        :raises KeyError: no node has that name or label.
        """
        for node in self.nodes:
            if node.name == name:
                return node
        for node in self.nodes:
            if node.label == name:
                return node
        raise KeyError(name)

    def step(self, alias: str) -> Step:
        """The step of canonical alias ``alias``, or the one the text gave that alias (the
        first, when the text used one alias for several wirings).

        :raises KeyError: no step has that alias.
        """
        for step in self.steps:
            if step.alias == alias:
                return step
        for step in self.steps:
            if step.label == alias:
                return step
        raise KeyError(alias)

    @property
    def step_names(self) -> tuple[str, ...]:
        """One name per step, in :attr:`steps` order: the name the text gave it (else its
        canonical alias), with ``#2``, ``#3``... on a name used again. The names a run's
        step reports are keyed by, and ``machine check`` shows."""
        seen: dict[str, int] = {}
        names = []
        for step in self.steps:
            base = step.label or step.alias
            seen[base] = seen.get(base, 0) + 1
            names.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
        return tuple(names)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return sum(len(strand.steps) for strand in self.strands)

    def to_notation(self, bracketed: bool = False) -> str:
        """The canonical text: one statement per line, or every statement in ``[...]`` on one
        line (MCH-7). Equal to the reference's canonical text for the same machine."""
        from ._notation import canonical_text

        return canonical_text(self, bracketed=bracketed)

    def to_mermaid(self) -> str:
        """A Mermaid flowchart of the machine."""
        from ._notation import mermaid_text

        return mermaid_text(self)

    def to_dot(self) -> str:
        """A Graphviz DOT graph of the machine."""
        from ._notation import dot_text

        return dot_text(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Machine):
            return NotImplemented
        return len(self.strands) == len(other.strands) and all(
            _strands_equivalent(a, b, self, other)
            for a, b in zip(self.strands, other.strands, strict=True)
        )

    def __hash__(self) -> int:
        return hash(tuple(len(strand.steps) for strand in self.strands))

    def __repr__(self) -> str:
        return f"Machine({len(self.strands)} strands, {len(self)} steps)"


def _strands_equivalent(a: Strand, b: Strand, ma: Machine, mb: Machine) -> bool:
    # Both walks name nodes in first-met order, so one node pairing exists iff the canonical
    # names agree position by position; the types of paired nodes must agree too.
    if len(a.steps) != len(b.steps):
        return False
    for x, y in zip(a.steps, b.steps, strict=True):
        if x.placement.maps != y.placement.maps or x.policy != y.policy:
            return False
        if not x.cap.is_equivalent(y.cap):
            return False
        if len(x.bindings) != len(y.bindings) or len(x.outputs) != len(y.outputs):
            return False
        for p, q in zip(x.bindings, y.bindings, strict=True):
            if not p.arg_media.is_equivalent(q.arg_media) or p.is_constant != q.is_constant:
                return False
            if p.node is None:
                if not constants_equal(p.constant, q.constant):
                    return False
            elif p.node != q.node or not _same_type(ma, mb, p.node, q.node or ""):
                return False
        for o, r in zip(x.outputs, y.outputs, strict=True):
            if not o.media.is_equivalent(r.media) or o.node != r.node:
                return False
            if not _same_type(ma, mb, o.node, r.node):
                return False
    return True


def _same_type(ma: Machine, mb: Machine, a: str, b: str) -> bool:
    return ma.node(a).media.is_equivalent(mb.node(b).media)


def build_machine(resolved: Sequence[ResolvedStrand]) -> Machine:
    """Name the steps and nodes of resolved strands and place their steps."""
    strands = []
    next_step = next_node = 0
    for index, strand in enumerate(resolved):
        names: dict[int, str] = {}
        for step in strand.steps:
            for node in step.source_nodes() + step.output_nodes():
                if node not in names:
                    names[node] = f"n{next_node}"
                    next_node += 1
        iteration = place_steps(step_shapes(strand.steps, strand.is_sequence))
        scope_of: dict[int, int] = {}
        for step, placement in zip(strand.steps, iteration.placements, strict=True):
            for node in step.output_nodes():
                scope_of[node] = placement.scope
        steps = []
        for step, placement in zip(strand.steps, iteration.placements, strict=True):
            outputs = []
            for taken in step.outputs:
                declared = step.definition.output_named(taken.name)
                outputs.append(
                    TakenOutput(
                        output=taken.name,
                        media=taken.media,
                        node=names[taken.node],
                        optional=bool(declared and declared.optional),
                        is_sequence=bool(declared and declared.is_sequence),
                    )
                )
            steps.append(
                Step(
                    alias=f"edge_{next_step}",
                    label=step.label,
                    cap=step.cap,
                    definition=step.definition,
                    bindings=tuple(
                        Binding(
                            arg=b.arg,
                            arg_media=b.slot,
                            node=None if b.node is None else names[b.node],
                            constant=b.constant,
                        )
                        for b in step.bindings
                    ),
                    outputs=tuple(outputs),
                    policy=step.policy,
                    placement=StepPlacement(
                        placed_in=placement.placed_in,
                        map=placement.map,
                        mapped=tuple(names[n] for n in placement.mapped),
                    ),
                    strand=index,
                    included_as=step.included_as,
                )
            )
            next_step += 1
        order = sorted(names, key=lambda n: int(names[n][1:]))
        nodes = tuple(
            Node(
                name=names[n],
                label=strand.labels[n],
                media=strand.nodes[n],
                is_sequence=strand.is_sequence[n],
                strand=index,
                scope=scope_of.get(n, 0),
            )
            for n in order
        )
        made = {n for step in strand.steps for n in step.output_nodes()}
        given = {n for step in strand.steps for n in step.source_nodes()}
        strands.append(
            Strand(
                index=index,
                steps=tuple(steps),
                nodes=nodes,
                inputs=tuple(names[n] for n in order if n not in made),
                outputs=tuple(names[n] for n in order if n not in given),
                scope_parents=iteration.scope_parents,
                scope_sources=tuple(
                    tuple(names[n] for n in sources) for sources in iteration.scope_sources
                ),
            )
        )
    return Machine(tuple(strands))
