"""Which steps run once per item, and inside which map (MCH-8).

Notation never writes iteration: it follows from cardinality. Every node lives in a *scope*:
the machine itself (scope 0) or a map. A map is what it iterates: the sequences it zips, in the
scope it is opened in; two steps that map over the same sequences in the same scope share the
map, so what one makes for an item reaches the other for that item.

A step is placed first in the deepest scope its members ask for (when those lie on one line
of nesting; otherwise the innermost scope enclosing them all). A member asks for

* the scope its node lives in, when bound to an arg that takes one value, or when a sequence
  is bound to an arg that takes a sequence (given whole);
* the scope enclosing the node's map, when a single value is bound to an arg that takes a
  sequence (the step folds what the map collected).

From there, each member bound to an arg that takes one value is a single value (given as is),
the item of a map the placement is inside (the step joins that map), or a sequence living in
or collected into the placement (mapped: the step runs in a map over it, several such members
zipped). A sequence from further out that no enclosing map iterates would make a cross product
nobody wrote, so the step moves out to where that sequence lives and the inner values are
collected and zipped with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = (
    "MemberShape",
    "StepShape",
    "IndexedPlacement",
    "Iteration",
    "CyclicSteps",
    "place_steps",
)

ROOT = 0


@attrs.frozen
class MemberShape:
    """A node a step is given, and whether the arg it is bound to takes a sequence."""

    node: int
    arg_is_sequence: bool


@attrs.frozen
class StepShape:
    """A step as iteration sees it: the nodes it is given (constants are not members) and the
    nodes it makes, with whether each output is declared a sequence."""

    members: tuple[MemberShape, ...]
    outputs: tuple[tuple[int, bool], ...]


@attrs.frozen(kw_only=True)
class IndexedPlacement:
    """Where a step runs, its mapped nodes by index (``_model.StepPlacement`` names them).

    :ivar placed_in: the scope the step is given its members in.
    :ivar map: the map the step runs in when it maps (opened inside ``placed_in``), else None.
    :ivar mapped: the nodes it maps over, zipped, in the order the step lists them.
    """

    placed_in: int
    map: int | None = None
    mapped: tuple[int, ...] = ()

    @property
    def maps(self) -> bool:
        return self.map is not None

    @property
    def scope(self) -> int:
        """The scope the step's runs happen in and its outputs live in."""
        return self.map if self.map is not None else self.placed_in


class CyclicSteps(Exception):
    """Steps that wait on one another (their indices)."""

    def __init__(self, steps: list[int]) -> None:
        super().__init__(steps)
        self.steps = steps


@attrs.frozen
class Iteration:
    """The placement of every step (in the order given) and the parent of every scope."""

    placements: tuple[IndexedPlacement, ...]
    scope_parents: tuple[int, ...]
    scope_sources: tuple[tuple[int, ...], ...]


class _Scopes:
    def __init__(self) -> None:
        self.parent = [ROOT]
        self.sources: list[tuple[int, ...]] = [()]
        self.node_scope: dict[int, int] = {}
        self.node_is_sequence: dict[int, bool] = {}

    def depth(self, scope: int) -> int:
        depth = 0
        while scope != ROOT:
            depth, scope = depth + 1, self.parent[scope]
        return depth

    def encloses(self, outer: int, inner: int) -> bool:
        while inner != outer:
            if inner == ROOT:
                return False
            inner = self.parent[inner]
        return True

    def common(self, a: int, b: int) -> int:
        while not self.encloses(a, b):
            a = self.parent[a]
        return a

    def iterated_between(self, node: int, inner: int, outer: int) -> bool:
        while inner != outer:
            if node in self.sources[inner]:
                return True
            inner = self.parent[inner]
        return False

    def place(self, step: StepShape) -> IndexedPlacement:
        asked = []
        for member in step.members:
            scope = self.node_scope[member.node]
            if member.arg_is_sequence and not self.node_is_sequence[member.node]:
                scope = self.parent[scope]
            asked.append(scope)
        deepest = ROOT
        for index, scope in enumerate(asked):
            if index == 0 or self.depth(scope) > self.depth(deepest):
                deepest = scope
        placed_in = deepest
        if not all(self.encloses(scope, deepest) for scope in asked):
            placed_in = asked[0]
            for scope in asked[1:]:
                placed_in = self.common(placed_in, scope)
        while True:
            mapped: list[int] = []
            moved = False
            for member in step.members:
                if member.arg_is_sequence:
                    continue
                lives_in = self.node_scope[member.node]
                if self.encloses(lives_in, placed_in):
                    if not self.node_is_sequence[member.node]:
                        continue
                    if lives_in != placed_in:
                        if self.iterated_between(member.node, placed_in, lives_in):
                            continue
                        placed_in, moved = lives_in, True
                        break
                if member.node not in mapped:
                    mapped.append(member.node)
            if not moved:
                break
        if not mapped:
            return IndexedPlacement(placed_in=placed_in)
        key = tuple(sorted(mapped))
        for scope in range(1, len(self.parent)):
            if self.parent[scope] == placed_in and self.sources[scope] == key:
                return IndexedPlacement(placed_in=placed_in, map=scope, mapped=tuple(mapped))
        self.parent.append(placed_in)
        self.sources.append(key)
        return IndexedPlacement(placed_in=placed_in, map=len(self.parent) - 1, mapped=tuple(mapped))


def place_steps(steps: Sequence[StepShape]) -> Iteration:
    """Place every step; an input of the machine (a node no step makes) is one value in the
    machine's scope.

    :raises CyclicSteps: some steps wait on one another.
    """
    scopes = _Scopes()
    produced = {node for step in steps for node, _ in step.outputs}
    for step in steps:
        for member in step.members:
            if member.node not in produced:
                scopes.node_scope[member.node] = ROOT
                scopes.node_is_sequence[member.node] = False
    placements: list[IndexedPlacement | None] = [None] * len(steps)
    left = len(steps)
    while left:
        before = left
        for index, step in enumerate(steps):
            if placements[index] is not None:
                continue
            if not all(member.node in scopes.node_scope for member in step.members):
                continue
            placement = scopes.place(step)
            for node, is_sequence in step.outputs:
                scopes.node_scope[node] = placement.scope
                scopes.node_is_sequence[node] = is_sequence
            placements[index] = placement
            left -= 1
        if left == before:
            raise CyclicSteps([i for i, p in enumerate(placements) if p is None])
    return Iteration(
        placements=tuple(p for p in placements if p is not None),
        scope_parents=tuple(scopes.parent),
        scope_sources=tuple(scopes.sources),
    )
