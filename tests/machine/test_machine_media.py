"""Constants held to media definitions: the reference's answers, each rule, no value quoted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cartridge_runtime.machine import (
    ConstantFailsValidationError,
    MachineError,
    MediaDef,
    MediaValidation,
    parse_machine,
)
from cartridge_runtime.manifest import ArgDef, CapDef, OutputDef

VECTORS = Path(__file__).resolve().parents[2] / "protocol_spec" / "vectors" / "machine"
REGISTRIES = {
    key: [CapDef.from_json(cap) for cap in caps]
    for key, caps in json.loads((VECTORS / "registries.json").read_text()).items()
}
CASES = [
    case
    for case in map(json.loads, (VECTORS / "cases.jsonl").read_text().splitlines())
    if "media_defs" in case
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_reference_answers_with_media_definitions(case: dict[str, Any]) -> None:
    expected = case["expect_with_media"]["kind"]
    try:
        parse_machine(case["text"], REGISTRIES[case["registry"]], media=case["media_defs"])
    except MachineError as error:
        assert error.kind == expected
    else:
        assert expected is None


TEXT = "media:enc=utf-8"
WINDOW = "media:integer;window"
CAP = CapDef(
    urn=f'cap:in="{TEXT}";op=roll;out="{TEXT}"',
    title="Roll",
    aliases=("roll",),
    args=[ArgDef.stdin(TEXT, name="text"), ArgDef.flag(WINDOW, "--window", name="window")],
    outputs=[OutputDef(media_urn=TEXT, name="out", output_description="out")],
)
HEADER = f"roll {CAP.urn}\n"


def _roll(constant: str, defs: list[Any]) -> None:
    parse_machine(HEADER + f"(t, window={constant}) -> roll -> o", [CAP], media=defs)


@pytest.mark.parametrize(
    ("rules", "constant", "words"),
    [
        ({"min": 1, "max": 365}, "0", "minimum value 1"),
        ({"min": 1, "max": 365.5}, "400", "maximum value 365.5"),
        ({"min_length": 3}, '"ab"', "minimum length 3"),
        ({"max_length": 2}, '"é"' + "", None),  # two UTF-8 bytes: passes
        ({"max_length": 1}, '"é"', "maximum length 1"),
        ({"max_length": 1}, "[1, 2]", "maximum array length 1"),
        ({"pattern": "^[a-z]+$"}, '"ABC"', "pattern"),
        ({"allowed_values": ["mean", "max"]}, '"median"', "allowed values"),
        ({"allowed_values": ["mean"]}, "3", None),  # the rule is about strings only
    ],
)
def test_each_rule_refuses_what_it_is_about(rules: dict[str, Any], constant: str,
                                             words: str | None) -> None:  # fmt: skip
    defs = [{"urn": WINDOW, "validation": rules}]
    if words is None:
        _roll(constant, defs)
        return
    with pytest.raises(ConstantFailsValidationError) as caught:
        _roll(constant, defs)
    assert words in str(caught.value) and "'window'" in str(caught.value)


def test_a_schema_is_held_and_its_message_names_no_value() -> None:
    defs = [MediaDef(urn=WINDOW, schema={"type": "integer", "minimum": 0})]
    _roll("7", defs)
    with pytest.raises(ConstantFailsValidationError) as caught:
        _roll('"s3cr3t-value"', defs)
    message = str(caught.value)
    assert "fails 'type'" in message and "s3cr3t" not in message
    assert caught.value.rule == "MCH-4" and caught.value.line == 2


def test_without_a_definition_for_the_arg_a_constant_cannot_be_checked() -> None:
    with pytest.raises(ConstantFailsValidationError) as caught:
        _roll("3", [{"urn": "media:other"}])
    assert "no media definition" in str(caught.value)
    _roll("3", [{"urn": "media:window;integer"}])  # the same URN in another spelling


def test_without_definitions_constants_are_not_checked() -> None:
    parse_machine(HEADER + "(t, window=-5) -> roll -> o", [CAP])


def test_a_broken_pattern_is_a_refusal_not_a_crash() -> None:
    with pytest.raises(ConstantFailsValidationError):
        _roll('"x"', [MediaDef(urn=WINDOW, validation=MediaValidation(pattern="("))])
