"""Every machine-notation vector the reference computed: the error kind it refuses a text with,
or both canonical forms and every step's per-item placement (protocol_spec/12-machines.md).

The vectors are data (``protocol_spec/vectors/machine/``); one parametrized case per line, by
its id. Where the reference's canonical text parses back to itself, ours must too: the
re-parse is equal (``==``) to the machine and writes the same text again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from cartridge_runtime.machine import Machine, MachineError, parse_machine
from cartridge_runtime.manifest import CapDef

VECTORS: Final = Path(__file__).resolve().parents[2] / "protocol_spec" / "vectors" / "machine"
CASES: Final = [json.loads(line) for line in (VECTORS / "cases.jsonl").read_text().splitlines()]
REGISTRIES: Final = {
    key: tuple(CapDef.from_json(cap) for cap in caps)
    for key, caps in json.loads((VECTORS / "registries.json").read_text()).items()
}
OK_CASES: Final = [case for case in CASES if case["expect"]["ok"]]
BAD_CASES: Final = [case for case in CASES if not case["expect"]["ok"]]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["id"] for case in cases]


def test_the_vector_set_is_whole() -> None:
    assert len(CASES) == 825
    assert len({case["id"] for case in CASES}) == len(CASES)
    assert {case["registry"] for case in CASES} <= set(REGISTRIES)
    assert OK_CASES and BAD_CASES


@pytest.mark.parametrize("case", BAD_CASES, ids=_ids(BAD_CASES))
def test_refused_like_the_reference(case: dict[str, Any]) -> None:
    expect = case["expect"]
    with pytest.raises(MachineError) as caught:
        parse_machine(case["text"], REGISTRIES[case["registry"]])
    assert caught.value.kind == expect["kind"]
    assert caught.value.family == expect["family"]
    assert caught.value.rule.startswith("MCH-")
    # One readable line that says where, and which rule.
    assert caught.value.rule in str(caught.value)


def _placement(machine: Machine) -> list[dict[str, Any]]:
    strands = []
    for strand in machine.strands:
        steps = []
        for step in strand.steps:
            p = step.placement
            steps.append({
                "step": step.alias, "is_loop": step.is_loop, "per_item": p.per_item,
                "scope": p.scope, "placed_in": p.placed_in, "map": p.map,
                "mapped": list(p.mapped), "retry": step.policy.retry,
                "on_error": step.policy.on_error.value,
            })  # fmt: skip
        strands.append({"steps": steps, "scope_parents": list(strand.scope_parents)})
    return strands


def _expected_placement(expect: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("step", "is_loop", "per_item", "scope", "placed_in", "map", "mapped", "retry",
            "on_error")  # fmt: skip
    return [
        {"steps": [{k: step[k] for k in keys} for step in strand["steps"]],
         "scope_parents": strand["scope_parents"]}
        for strand in expect["strands"]
    ]  # fmt: skip


@pytest.mark.parametrize("case", OK_CASES, ids=_ids(OK_CASES))
def test_resolved_like_the_reference(case: dict[str, Any]) -> None:
    expect = case["expect"]
    caps = REGISTRIES[case["registry"]]
    machine = parse_machine(case["text"], caps)
    assert machine.to_notation() == expect["line"]
    assert machine.to_notation(bracketed=True) == expect["bracketed"]
    assert _placement(machine) == _expected_placement(expect)
    assert [str(step.cap) for step in machine.steps] == [
        step["cap"] for strand in expect["strands"] for step in strand["steps"]
    ]
    for strand, names, expected in zip(
        machine.strands, expect["node_names"], expect["strands"], strict=True
    ):
        labelled = {node.label: node.name for node in strand.nodes if node.label is not None}
        assert labelled == names
        # The reference lists nodes in its own order; each canonical name is one node.
        assert {n.name: (str(n.media), n.is_sequence) for n in strand.nodes} == {
            n["name"]: (n["urn"], n["is_sequence"]) for n in expected["nodes"]
        }
        assert sorted(strand.inputs) == sorted(expected["inputs"])
        assert sorted(strand.outputs) == sorted(expected["outputs"])
    reparses = expect["canonical_reparses"]
    for bracketed in (False, True):
        text = machine.to_notation(bracketed=bracketed)
        if reparses["bracketed" if bracketed else "line"]:
            again = parse_machine(text, caps)
            assert again == machine
            assert again.to_notation(bracketed=bracketed) == text
            assert again.to_notation(bracketed=not bracketed) == machine.to_notation(
                bracketed=not bracketed
            )
        else:
            with pytest.raises(MachineError):
                parse_machine(text, caps)
