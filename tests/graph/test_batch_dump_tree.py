"""The grow-graph batch (whole or nothing), the JSON document, and the tree."""

from __future__ import annotations

import json

import pytest

from cartridge_runtime.graph import (
    GraphModel,
    GraphRefused,
    NodeState,
    Refusal,
    Schedule,
    apply_batch,
    dump_graph,
    load_graph,
    parse_batch,
    render_tree,
)

TEXT = "media:text;textable"
CAP = 'cap:in="media:text;textable";op=tool;out="media:text;textable"'


def test_a_batch_refers_to_earlier_results_with_dollar_k() -> None:
    g = GraphModel()
    batch = parse_batch(
        json.dumps(
            {
                "ops": [
                    {"op": "add_value_node", "value": "{}", "media": TEXT, "explain": "input"},
                    {"op": "instantiate_with_deps", "cap": CAP, "deps": {TEXT: "$0"}},
                    {"op": "alias", "alias": "chat", "node": "$1"},
                    {"op": "alias", "alias": ".empty", "node": None},
                    {"op": "detach_from_alias", "alias": "$2"},
                    {"op": "add_value_node", "value_b64": "AAE=", "media": "media:"},
                ]
            }
        )
    )
    results = apply_batch(g, batch, made_by="model-7")
    assert results == ["value-1", "tool-2", "chat", ".empty", "chat@3", "value-4"]
    assert g.node("tool-2").made_by == "model-7"
    assert g.node("value-4").value == b"\x00\x01"


def test_a_refused_op_leaves_the_graph_as_it_was_and_names_its_index() -> None:
    g = GraphModel()
    g.add_value_node(b"x", media=TEXT)
    before = g.snapshot()
    batch = parse_batch(
        {
            "ops": [
                {"op": "add_value_node", "value": "a", "media": TEXT},
                {"op": "alias", "alias": ".x", "node": "$0"},
                {"op": "instantiate_with_deps", "cap": CAP, "deps": {TEXT: "ghost"}},
            ]
        }
    )
    with pytest.raises(GraphRefused) as err:
        apply_batch(g, batch)
    assert err.value.index == 2 and err.value.message.startswith("op 2: ")
    assert g.snapshot() == before


@pytest.mark.parametrize(
    ("doc", "index"),
    [
        ({"ops": [{"op": "nope"}]}, 0),
        ({"ops": [{"op": "add_value_node", "media": TEXT}]}, 0),
        ({"ops": [{"op": "alias", "alias": ".a"}, {"op": "alias"}]}, 1),
        ({"ops": [{"op": "instantiate_with_deps", "cap": CAP, "deps": {TEXT: 3}}]}, 0),
        ({"ops": [{"op": "add_value_node", "value_b64": "@@", "media": TEXT}]}, 0),
    ],
)
def test_malformed_ops_are_refused_naming_their_index(doc: dict, index: int) -> None:
    with pytest.raises(GraphRefused) as err:
        parse_batch(doc)
    assert err.value.index == index and err.value.reason is Refusal.BAD_OP


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"ops": 3}'])
def test_a_batch_is_an_object_with_ops(raw: bytes) -> None:
    with pytest.raises(GraphRefused) as err:
        parse_batch(raw)
    assert err.value.index is None


def test_a_forward_reference_is_refused() -> None:
    with pytest.raises(GraphRefused) as err:
        apply_batch(GraphModel(), parse_batch({"ops": [{"op": "alias", "alias": "$1"}]}))
    assert err.value.index == 0


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (None, None),
        (7, 7),
        ("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ],
)
def test_the_parent_is_a_request_id(raw: object, parsed: object) -> None:
    assert parse_batch({"ops": [], "parent": raw}).parent == parsed


@pytest.mark.parametrize("raw", ["0123456789ABCDEF0123456789ABCDEF", "abc", -1, True, 1.5])
def test_a_bad_parent_is_refused(raw: object) -> None:
    with pytest.raises(GraphRefused):
        parse_batch({"ops": [], "parent": raw})


def test_a_cap_check_refuses_inside_the_batch() -> None:
    def check(cap: str) -> None:
        raise GraphRefused(Refusal.NO_CAP, f"nobody serves {cap}")

    g = GraphModel()
    with pytest.raises(GraphRefused) as err:
        apply_batch(
            g,
            parse_batch({"ops": [{"op": "instantiate_with_deps", "cap": CAP}]}),
            check_cap=check,
        )
    assert err.value.reason is Refusal.NO_CAP and err.value.index == 0 and len(g) == 0


def _worked_graph() -> tuple[GraphModel, str]:
    g = GraphModel()
    p = g.add_value_node(b"hello", media=TEXT, explain="chat messages")
    g.alias("chat", p)
    model = g.instantiate_with_deps(CAP, {TEXT: "chat"}, explain="model")
    g.alias(".out", model)
    g.detach_from_alias("chat")
    tool = g.instantiate_with_deps(CAP, {TEXT: p, "media:bytes": f"{model}.calls"})
    g.alias("chat", tool)
    final = g.instantiate_with_deps(CAP, {TEXT: ".out"}, explain="answer")
    g.add_value_node(b"\xff\x00", media="media:")
    return g, final


def test_dump_and_load_round_trip_with_states_and_outputs() -> None:
    g, final = _worked_graph()
    states = {"tool-4": NodeState.DONE, final: NodeState.FAILED}
    doc = dump_graph(g, states, reasons={final: "boom"}, outputs={"tool-4": {"main": "aGk="}})
    text = json.dumps(doc)
    g2, states2, outputs2 = load_graph(text)
    assert list(g2) == list(g)
    assert dict(g2.aliases) == dict(g.aliases)
    assert [a for a in g2.aliases if g2.is_frozen(a)] == [a for a in g.aliases if g.is_frozen(a)]
    assert states2["tool-4"] is NodeState.DONE and states2[final] is NodeState.FAILED
    assert outputs2 == {"tool-4": {"main": "aGk="}}
    assert dump_graph(g2, states2, reasons={final: "boom"}, outputs=outputs2) == doc
    # the counter goes on past every loaded name
    assert g2.add_value_node(b"z", media=TEXT) not in g.nodes


_HEAD = {"format": "cartridge-graph", "version": 1, "counter": 1}
_GHOST_MEMBER = {**_HEAD, "nodes": [], "aliases": [{"name": "a", "members": ["ghost"]}]}
_GHOST_SOURCE = {
    **_HEAD,
    "nodes": [
        {
            "name": "x-1",
            "kind": "cap",
            "cap": CAP,
            "deps": [{"arg": TEXT, "sources": ["ghost"]}],
        }
    ],
    "aliases": [],
}


@pytest.mark.parametrize(
    "doc", ["{}", "nope", json.dumps(_GHOST_MEMBER), json.dumps(_GHOST_SOURCE)]
)
def test_a_bad_document_is_refused(doc: str) -> None:
    with pytest.raises(GraphRefused):
        load_graph(doc)


def test_the_tree_shows_states_explain_args_and_named_outputs() -> None:  # DAG-53
    g, final = _worked_graph()
    s = Schedule(g)
    tree = render_tree(g, [final, "tool-4"], s.state)
    lines = tree.splitlines()
    assert lines[0].startswith(f"{final} [⋯ waiting]") and lines[0].endswith("(answer)")
    assert lines[1].startswith("└── tool-2 [⋯ waiting]")  # alias members in place
    assert "value-1 [✓ done]" in lines[2] and "(chat messages)" in lines[2]
    assert any("(arg: media:bytes)" in line for line in lines)
    assert any("tool-2.calls (above)" in line for line in lines)
