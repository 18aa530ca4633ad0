"""The graph model and its four operations, against the DAG facts that apply to it."""

from __future__ import annotations

import pytest

from cartridge_runtime.graph import (
    Dep,
    GraphLimits,
    GraphModel,
    GraphRefused,
    NodeKind,
    Refusal,
    Source,
)

TEXT = "media:text;textable"
CAP = 'cap:in="media:text;textable";op=shout;out="media:text;textable"'
JOIN = 'cap:in="media:text;textable";op=join;out="media:text;textable"'


def test_a_value_node_is_named_value_n_and_holds_its_bytes() -> None:  # DAG-3, DAG-16
    g = GraphModel()
    a = g.add_value_node(b"hi", media=TEXT, explain="prompt")
    b = g.add_value_node(b"ho", media=TEXT)
    assert (a, b) == ("value-1", "value-2")
    node = g.node(a)
    assert node.kind is NodeKind.VALUE and node.value == b"hi" and node.explain == "prompt"
    assert g.aliases == {}  # adds nothing to any alias


def test_a_cap_node_is_named_after_its_op_tag_and_reads_its_sources() -> None:
    g = GraphModel()
    v = g.add_value_node(b"x", media=TEXT)
    n = g.instantiate_with_deps(CAP, {TEXT: v})
    assert n == "shout-2"
    assert g.node(n).deps == (Dep(TEXT, (Source(v),)),)
    assert g.inputs_of(n) == [v]


def test_a_list_of_sources_is_read_one_after_another() -> None:  # DAG-2
    g = GraphModel()
    a = g.add_value_node(b"a", media=TEXT)
    b = g.add_value_node(b"b", media=TEXT)
    n = g.instantiate_with_deps(JOIN, {TEXT: [a, b, a]})
    assert g.expand(g.node(n).deps[0]) == [(a, None), (b, None)]  # a repeat is read once


def test_a_named_output_is_a_source() -> None:
    g = GraphModel()
    v = g.add_value_node(b"x", media=TEXT)
    n = g.instantiate_with_deps(CAP, {TEXT: v})
    m = g.instantiate_with_deps(JOIN, {TEXT: f"{n}.stats"})
    assert g.node(m).deps[0].sources == (Source(n, "stats"),)
    with pytest.raises(GraphRefused) as err:
        g.instantiate_with_deps(JOIN, {TEXT: f"{v}.stats"})  # a value has no named output
    assert err.value.reason is Refusal.UNKNOWN_NAME


def test_aliases_are_ordered_append_only_lists_with_repeats() -> None:  # DAG-7, DAG-23
    g = GraphModel()
    a = g.add_value_node(b"a", media=TEXT)
    b = g.add_value_node(b"b", media=TEXT)
    assert g.alias("chat", None) == "chat"
    assert g.aliases["chat"] == ()
    g.alias("chat", a)
    g.alias("chat", b)
    g.alias("chat", a)
    assert g.aliases["chat"] == (a, b, a)
    assert g.has("chat") and g.has(a)


def test_an_alias_holds_nodes_not_aliases() -> None:  # DAG-23
    g = GraphModel()
    g.alias("x", None)
    with pytest.raises(GraphRefused) as err:
        g.alias("y", "x")
    assert err.value.reason is Refusal.UNKNOWN_NAME


def test_a_reader_of_a_live_alias_sees_members_appended_later() -> None:  # DAG-9, DAG-19
    g = GraphModel()
    a = g.add_value_node(b"a", media=TEXT)
    g.alias("chat", a)
    m = g.instantiate_with_deps(JOIN, {TEXT: "chat"})
    b = g.add_value_node(b"b", media=TEXT)
    g.alias("chat", b)
    assert g.inputs_of(m) == [a, b]


def test_detach_freezes_the_alias_for_its_readers_now_and_it_keeps_growing() -> None:  # DAG-11
    g = GraphModel()
    p = g.add_value_node(b"p", media=TEXT)
    g.alias("chat", p)
    m1 = g.instantiate_with_deps(JOIN, {TEXT: "chat"})
    frozen = g.detach_from_alias("chat")
    assert frozen.startswith("chat@")
    assert g.aliases[frozen] == (p,) and g.is_frozen(frozen)
    assert g.node(m1).deps[0].sources == (Source(frozen),)
    c = g.add_value_node(b"c", media=TEXT)
    g.alias("chat", c)
    m2 = g.instantiate_with_deps(JOIN, {TEXT: "chat"})
    assert g.inputs_of(m1) == [p]
    assert g.inputs_of(m2) == [p, c]  # later readers see old and new members
    with pytest.raises(GraphRefused) as err:
        g.alias(frozen, c)
    assert err.value.reason is Refusal.FROZEN


def test_detach_of_an_unknown_alias_is_refused() -> None:  # DAG-25
    with pytest.raises(GraphRefused) as err:
        GraphModel().detach_from_alias(".nope")
    assert err.value.reason is Refusal.UNKNOWN_NAME
    assert err.value.code == "GRAPH_REFUSED" and err.value.attribution_class == "input"


def test_an_unknown_source_names_itself() -> None:  # DAG-21
    g = GraphModel()
    with pytest.raises(GraphRefused, match="'ghost'"):
        g.instantiate_with_deps(CAP, {TEXT: "ghost"})
    assert len(g) == 0


def test_an_append_that_closes_a_cycle_is_refused_where_it_is_made() -> None:  # DAG-41
    g = GraphModel()
    g.alias(".loop", None)
    m = g.instantiate_with_deps(JOIN, {TEXT: ".loop"})
    n = g.instantiate_with_deps(CAP, {TEXT: m})
    before = g.snapshot()
    with pytest.raises(GraphRefused) as err:
        g.alias(".loop", n)
    assert err.value.reason is Refusal.CYCLE and m in err.value.message
    with pytest.raises(GraphRefused) as err:
        g.alias(".loop", m)  # a node reading the alias, appended to it
    assert err.value.reason is Refusal.CYCLE
    assert g.snapshot() == before


def test_detach_first_unrolls_the_loop() -> None:  # DAG-41: the tool loop's convention
    g = GraphModel()
    g.alias("chat", g.add_value_node(b"p", media=TEXT))
    m = g.instantiate_with_deps(JOIN, {TEXT: "chat"})
    n = g.instantiate_with_deps(CAP, {TEXT: m})
    g.detach_from_alias("chat")
    g.alias("chat", n)  # m reads the frozen copy now: no cycle
    assert n in g.aliases["chat"]


def test_limits_are_refused_with_a_typed_error() -> None:
    g = GraphModel(GraphLimits(max_nodes=2, max_value_bytes=4))
    with pytest.raises(GraphRefused) as err:
        g.add_value_node(b"12345", media=TEXT)
    assert err.value.reason is Refusal.LIMIT
    g.add_value_node(b"1", media=TEXT)
    g.add_value_node(b"2", media=TEXT)
    with pytest.raises(GraphRefused) as err:
        g.add_value_node(b"3", media=TEXT)
    assert err.value.reason is Refusal.LIMIT and "2 nodes" in err.value.message


def test_the_default_node_limit_is_ten_thousand() -> None:
    assert GraphLimits().max_nodes == 10_000


@pytest.mark.parametrize("bad", ["", "two words", "x\ny"])
def test_an_alias_name_is_a_word(bad: str) -> None:
    with pytest.raises(GraphRefused) as err:
        GraphModel().alias(bad)
    assert err.value.reason is Refusal.BAD_OP


def test_an_alias_cannot_take_a_nodes_name() -> None:
    g = GraphModel()
    v = g.add_value_node(b"x", media=TEXT)
    with pytest.raises(GraphRefused) as err:
        g.alias(v)
    assert err.value.reason is Refusal.NAME_TAKEN


def test_a_malformed_cap_is_refused() -> None:
    with pytest.raises(GraphRefused) as err:
        GraphModel().instantiate_with_deps("not a cap")
    assert err.value.reason is Refusal.BAD_OP


def test_every_change_moves_the_version() -> None:  # open point 1: aliases count too
    g = GraphModel()
    v0 = g.version
    a = g.add_value_node(b"a", media=TEXT)
    v1 = g.version
    g.alias(".out", a)
    v2 = g.version
    g.detach_from_alias(".out")
    assert v0 < v1 < v2 < g.version


def test_a_refusal_pickles_with_its_fields() -> None:
    import pickle

    err = GraphRefused(Refusal.CYCLE, "loop", 3)
    back = pickle.loads(pickle.dumps(err))
    assert (back.reason, back.detail, back.index, back.message) == (
        Refusal.CYCLE,
        "loop",
        3,
        "op 3: loop",
    )
