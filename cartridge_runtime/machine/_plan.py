"""How a machine runs: what each step is given in which form, in which scope (sans-IO).

:func:`plan_machine` reads a resolved :class:`Machine` into a :class:`Plan` the executor walks.
It decides everything a run needs to know ahead of time:

* the *scopes*: the machine itself (one instance) and each map (one instance per item of the
  sequences it zips, inside an instance of its parent scope);
* for every step, the scope it runs in and, for every binding, how its value is found from
  there (:class:`Feed`): a value of the same scope instance, the item of an enclosing map, a
  whole value from an enclosing scope, or what an inner map collected;
* which values of the machine's own scope stream (scalars and sequences of scope 0 travel as
  they are produced) and which a step must hold whole (an input from an enclosing scope given
  to every item, and all inputs of a step that takes several streamed ones, since a call sends
  its input streams one after the other);
* the skip rule (MCH-12): a step runs in a scope instance only when every node it is given is
  present there; an optional output that did not fire, or a step that failed under
  ``on_error=absent``, makes its nodes absent, and absence flows downstream.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from ._model import Binding, Machine, Node, Step

__all__ = ("FeedKind", "Feed", "StepPlan", "ScopePlan", "Plan", "plan_machine", "step_runs")


class FeedKind(enum.Enum):
    """How a bound node reaches a step."""

    LOCAL = "local"  #: a value of the scope instance the step runs in
    ITEM = "item"  #: the current item of an enclosing map that iterates the node
    OUTER = "outer"  #: a whole value of an enclosing scope, the same for every item
    COLLECTED = "collected"  #: the values an inner map made, in item order, as one sequence


@attrs.frozen(kw_only=True)
class Feed:
    """One binding of a step, and where its value comes from."""

    binding: Binding
    kind: FeedKind
    node: Node | None  #: None for a constant
    #: The scope whose instance holds the value: the step's own (LOCAL), the enclosing map
    #: that iterates it (ITEM), the enclosing scope it lives in (OUTER), or the scope the
    #: collected node lives in (COLLECTED).
    scope: int
    #: The step is given this value as a stream (only for LOCAL values of scope 0).
    streamed: bool


@attrs.frozen(kw_only=True)
class StepPlan:
    step: Step
    scope: int
    feeds: tuple[Feed, ...]
    #: The step holds its inputs and outputs whole: it may retry (its inputs are sent again).
    buffered: bool


@attrs.frozen(kw_only=True)
class ScopePlan:
    """A scope of one strand: the machine itself (``index`` 0) or a map."""

    strand: int
    index: int
    parent: int
    sources: tuple[str, ...]  #: the sequence nodes a map zips, item by item
    steps: tuple[StepPlan, ...]  #: the steps that run in it, in canonical order
    children: tuple[int, ...]  #: the maps opened directly inside it
    nodes: tuple[str, ...]  #: the nodes that live in it


@attrs.frozen(kw_only=True)
class Plan:
    machine: Machine
    scopes: Mapping[tuple[int, int], ScopePlan]  #: by (strand, scope)
    #: How many LOCAL streamed feeds read each scope-0 node (one reader each).
    stream_readers: Mapping[str, int]
    #: The scope-0 sequence nodes maps iterate, and how many maps read each.
    item_readers: Mapping[str, int]
    #: By (strand, scope), the nodes of inner scopes an instance of that scope collects: what
    #: a step, a map or the machine's outputs need from further in, handed outward level by
    #: level up to the outermost scope that needs it.
    collected: Mapping[tuple[int, int], frozenset[str]]

    def scope(self, strand: int, index: int) -> ScopePlan:
        return self.scopes[(strand, index)]

    @property
    def roots(self) -> tuple[ScopePlan, ...]:
        return tuple(self.scopes[(s.index, 0)] for s in self.machine.strands)


def _encloses(parents: tuple[int, ...], outer: int, inner: int) -> bool:
    while inner != outer:
        if inner == 0:
            return False
        inner = parents[inner]
    return True


def _feed(
    machine: Machine,
    parents: tuple[int, ...],
    sources: tuple[tuple[str, ...], ...],
    step: Step,
    binding: Binding,
) -> Feed:
    if binding.node is None:
        return Feed(binding=binding, kind=FeedKind.OUTER, node=None, scope=0, streamed=False)
    node = machine.node(binding.node)
    here = step.placement.scope
    if node.scope == here:
        return Feed(binding=binding, kind=FeedKind.LOCAL, node=node, scope=here, streamed=here == 0)
    at = here
    while at != 0:
        if node.name in sources[at]:
            return Feed(binding=binding, kind=FeedKind.ITEM, node=node, scope=at, streamed=False)
        at = parents[at]
    if _encloses(parents, node.scope, here):
        return Feed(
            binding=binding, kind=FeedKind.OUTER, node=node, scope=node.scope, streamed=False
        )
    return Feed(
        binding=binding, kind=FeedKind.COLLECTED, node=node, scope=node.scope, streamed=False
    )


def plan_machine(machine: Machine) -> Plan:
    """The plan of ``machine`` (a pure function of it)."""
    scopes: dict[tuple[int, int], ScopePlan] = {}
    stream_readers: dict[str, int] = {}
    item_readers: dict[str, int] = {}
    for strand in machine.strands:
        parents = strand.scope_parents
        by_scope: dict[int, list[StepPlan]] = {i: [] for i in range(len(parents))}
        for step in strand.steps:
            feeds = [_feed(machine, parents, strand.scope_sources, step, b) for b in step.bindings]
            streamed = [f for f in feeds if f.streamed]
            buffered = step.policy.retry > 0
            if buffered or len(streamed) > 1:
                feeds = [attrs.evolve(f, streamed=False) for f in feeds]
            for feed in feeds:
                if feed.streamed and feed.node is not None:
                    stream_readers[feed.node.name] = stream_readers.get(feed.node.name, 0) + 1
            by_scope[step.placement.scope].append(
                StepPlan(
                    step=step, scope=step.placement.scope, feeds=tuple(feeds), buffered=buffered
                )
            )
        for index, parent in enumerate(parents):
            children = tuple(i for i in range(1, len(parents)) if parents[i] == index)
            sources = strand.scope_sources[index]
            if index and parent == 0:
                for name in sources:
                    if machine.node(name).scope == 0:
                        item_readers[name] = item_readers.get(name, 0) + 1
            scopes[(strand.index, index)] = ScopePlan(
                strand=strand.index,
                index=index,
                parent=parent if index else 0,
                sources=sources,
                steps=tuple(by_scope[index]),
                children=children,
                nodes=tuple(n.name for n in strand.nodes if n.scope == index),
            )
    return Plan(
        machine=machine,
        scopes=scopes,
        stream_readers=stream_readers,
        item_readers=item_readers,
        collected=_collected(machine, scopes),
    )


def _depth(parents: tuple[int, ...], scope: int) -> int:
    depth = 0
    while scope:
        depth, scope = depth + 1, parents[scope]
    return depth


def _collected(
    machine: Machine, scopes: Mapping[tuple[int, int], ScopePlan]
) -> dict[tuple[int, int], frozenset[str]]:
    outputs = {n.name for n in machine.outputs}
    into: dict[tuple[int, int], set[str]] = {}
    for strand in machine.strands:
        parents = strand.scope_parents
        outermost: dict[str, int] = {}  # node -> the outermost scope that needs it

        def needs(
            node: str,
            scope: int,
            outermost: dict[str, int] = outermost,
            parents: tuple[int, ...] = parents,
        ) -> None:
            known = outermost.get(node)
            if known is None or _depth(parents, scope) < _depth(parents, known):
                outermost[node] = scope

        for index in range(len(parents)):
            sp = scopes[(strand.index, index)]
            for step in sp.steps:
                for feed in step.feeds:
                    if feed.kind is FeedKind.COLLECTED and feed.node is not None:
                        needs(feed.node.name, index)
            if index:
                for source in sp.sources:
                    needs(source, sp.parent)
        for node in strand.nodes:
            if node.name in outputs and node.scope:
                needs(node.name, 0)
        for name, outer in outermost.items():
            at = machine.node(name).scope
            while at not in (outer, 0):
                at = parents[at]
                into.setdefault((strand.index, at), set()).add(name)
    return {key: frozenset(names) for key, names in into.items()}


def step_runs(step: StepPlan, present: Mapping[str, bool]) -> bool:
    """Whether ``step`` runs, given which of its nodes are present (MCH-12): every node it is
    given must be; a constant always is."""
    return all(present.get(f.node.name, False) for f in step.feeds if f.node is not None)
