"""Random sequences of the four operations: never a cycle, never a lost node, and the JSON
document round-trips."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cartridge_runtime.graph import (
    GraphModel,
    GraphRefused,
    NodeState,
    Schedule,
    dump_graph,
    load_graph,
)

TEXT = "media:text;textable"
CAP = 'cap:in="media:text;textable";op=step;out="media:text;textable"'
ALIASES = (".a", ".b", ".c")

op = st.one_of(
    st.tuples(st.just("value"), st.binary(max_size=4)),
    st.tuples(st.just("inst"), st.lists(st.integers(0, 40), max_size=3)),
    st.tuples(st.just("alias"), st.sampled_from(ALIASES), st.integers(0, 40) | st.none()),
    st.tuples(st.just("detach"), st.sampled_from(ALIASES)),
)


def _names(g: GraphModel) -> list[str]:
    return [*g.nodes, *g.aliases]


def apply(g: GraphModel, step: tuple) -> None:
    kind = step[0]
    names = _names(g)
    if kind == "value":
        g.add_value_node(step[1], media=TEXT)
    elif kind == "inst":
        refs = [names[i % len(names)] for i in step[1]] if names else []
        g.instantiate_with_deps(CAP, {TEXT: refs} if refs else None)
    elif kind == "alias":
        nodes = list(g.nodes)
        g.alias(step[1], nodes[step[2] % len(nodes)] if nodes and step[2] is not None else None)
    else:
        g.detach_from_alias(step[1])


def _acyclic(g: GraphModel) -> bool:
    state: dict[str, int] = {}

    def visit(n: str) -> bool:
        if state.get(n) == 1:
            return False
        if state.get(n) == 2:
            return True
        state[n] = 1
        ok = all(visit(m) for m in g.inputs_of(n))
        state[n] = 2
        return ok

    return all(visit(n) for n in g.nodes)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_random_growth_never_closes_a_cycle_nor_loses_a_node(steps: list[tuple]) -> None:
    g = GraphModel()
    made: list[str] = []
    for step in steps:
        before = g.snapshot()
        try:
            apply(g, step)
        except GraphRefused:
            assert g.snapshot() == before  # a refusal changes nothing
        made = [n for n in made if n in g.nodes] + [n for n in g.nodes if n not in made]
        assert _acyclic(g)
    assert set(made) == set(g.nodes)  # nothing removed, ever
    # every node the run reaches is decided: the schedule runs the graph to its end
    s = Schedule(g)
    while s.is_active():
        for name in s.get_ready():
            s.done(name)
    assert all(state is NodeState.DONE for state in s.states.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(op, max_size=30))
def test_dump_and_load_round_trip(steps: list[tuple]) -> None:
    g = GraphModel()
    for step in steps:
        with contextlib.suppress(GraphRefused):
            apply(g, step)
    doc = dump_graph(g)
    g2, states, _ = load_graph(json.dumps(doc))
    assert list(g2) == list(g) and dict(g2.aliases) == dict(g.aliases)
    assert dump_graph(g2, states) == doc
