"""Properties of machine notation over generated machines (``_machine_gen``): the canonical
forms parse back to the same machine and are fixed points, the builder makes the machine the
text makes, and no text — arbitrary, truncated or with characters put in — raises anything
but a :class:`MachineError` (protocol_spec/12-machines.md, MCH-1 and MCH-7)."""

from __future__ import annotations

from typing import Final

import attrs
import pytest
from _machine_gen import Plan, build, constants, plans, texts
from _machine_world import CAPS, headers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.machine import (
    Machine,
    MachineBuilder,
    MachineError,
    constant_text,
    parse_machine,
)

FAST: Final = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
#: The characters the notation is made of, and a few it is not.
ALPHABET: Final = st.sampled_from([*'[](){}=,->"\\: \n\t;_-aAzZ09.eE+', "é", "\x00", "😀"])


@st.composite
def written(draw: st.DrawFn) -> tuple[Plan, str]:
    plan = draw(plans())
    return plan, draw(texts(plan))


def _parse(text: str) -> Machine:
    return parse_machine(text, CAPS)


@FAST
@given(written())
def test_the_canonical_forms_parse_back_to_the_machine(case: tuple[Plan, str]) -> None:
    _, text = case
    machine = _parse(text)
    for bracketed in (False, True):
        canonical = machine.to_notation(bracketed=bracketed)
        again = _parse(canonical)
        assert again == machine
        assert hash(again) == hash(machine)
        # A fixed point, in both forms.
        assert again.to_notation(bracketed=bracketed) == canonical
        assert again.to_notation(bracketed=not bracketed) == machine.to_notation(
            bracketed=not bracketed
        )
    # The two forms hold the same statements.
    line = machine.to_notation().split("\n")
    assert machine.to_notation(bracketed=True) == "".join(f"[{s}]" for s in line)


@FAST
@given(written())
def test_what_the_text_says_is_what_the_machine_holds(case: tuple[Plan, str]) -> None:
    plan, text = case
    machine = _parse(text)
    assert len(machine) == len(plan.steps)
    by_label: dict[str, list[tuple[int, str]]] = {}
    for step in plan.steps:
        by_label.setdefault(step.alias, []).append((step.retry, step.absent))
    for step in machine.steps:
        assert step.label is not None
        assert (step.policy.retry, step.policy.on_error.value == "absent") in by_label[step.label]
    inputs = {name for name, _ in plan.inputs}
    assert {node.label for node in machine.inputs} == inputs
    for node in machine.nodes:
        assert node.name.startswith("n") and node.label is not None
    # Every constant the text gave is bound, equal to what was written.
    written_constants = sorted(
        constant_text(g.constant) for s in plan.steps for g in s.given if g.node is None
    )
    bound = sorted(
        constant_text(b.constant) for s in machine.steps for b in s.bindings if b.is_constant
    )
    assert bound == written_constants


@FAST
@given(written(), st.booleans())
def test_the_builder_makes_the_machine_the_text_makes(
    case: tuple[Plan, str], declare: bool
) -> None:
    plan, text = case
    built = build(plan, declare_inputs=declare)
    assert built == _parse(text)
    assert built.to_notation() == _parse(text).to_notation()


@FAST
@given(written(), st.integers(min_value=0, max_value=3))
def test_a_changed_policy_is_another_machine(case: tuple[Plan, str], which: int) -> None:
    plan, _ = case
    target = which % len(plan.steps)
    steps = list(plan.steps)
    steps[target] = attrs.evolve(steps[target], retry=steps[target].retry + 1)
    changed = attrs.evolve(plan, steps=tuple(steps))
    assert build(changed) != build(plan)


@FAST
@given(constants, constants)
def test_constants_compare_by_json_value(a: object, b: object) -> None:
    def machine(value: object) -> Machine:
        return MachineBuilder(CAPS).step("s", _JOIN, inputs={"words": "w", "sep": value}).build()

    if isinstance(a, str) or isinstance(b, str):
        return  # a string names a node in the builder
    same = constant_text(a) == constant_text(b)
    assert (machine(a) == machine(b)) is same


_JOIN: Final = 'cap:in="media:enc=utf-8;word";op=join;out="media:enc=utf-8"'


def _only_machine_errors(text: str) -> None:
    try:
        _parse(text)
    except MachineError as error:
        assert error.kind == type(error).__name__
        assert "\n" not in str(error)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_machine_errors(text: str) -> None:
    _only_machine_errors(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_notation_like_text_raises_only_machine_errors(text: str) -> None:
    _only_machine_errors(text)
    _only_machine_errors(headers("words", "join") + "\n" + text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written())
def test_every_truncation_raises_only_machine_errors(case: tuple[Plan, str]) -> None:
    _, text = case
    for end in range(len(text)):
        _only_machine_errors(text[:end])


@FAST
@given(written(), st.lists(st.tuples(st.integers(min_value=0), ALPHABET), min_size=1, max_size=4))
def test_characters_put_in_raise_only_machine_errors(
    case: tuple[Plan, str], insertions: list[tuple[int, str]]
) -> None:
    _, text = case
    for at, char in insertions:
        at %= len(text) + 1
        text = text[:at] + char + text[at:]
    _only_machine_errors(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        "]",
        "->",
        "a -> b -> c",
        "[a cap:]",
        'a cap:"',
        "a machine",
        "(a=) -> b -> c",
        "(a=1e999) -> b -> c",
        '(a="\\ud800") -> b -> c',
        "(a=18446744073709551616) -> b -> c",
        "x -> y{retry=} -> z",
        "\x00",
        "[" * 500,
        "(" * 500,
        "{" * 500 + "}" * 500,
        "(s=" + "[" * 2000 + "]" * 2000 + ") -> w -> x",
    ],
)
def test_hostile_texts(text: str) -> None:
    _only_machine_errors(text)


def test_constants_nest_at_most_max_nesting_deep() -> None:
    from cartridge_runtime.machine._grammar import MAX_NESTING

    def text(depth: int, open_: str = "[", close: str = "]") -> str:
        return headers("join") + f"\n(w, sep={open_ * depth}{close * depth}) -> join -> x"

    assert parse_machine(text(MAX_NESTING), CAPS).steps[0].bindings[0].is_constant
    objects = '{"a":' * MAX_NESTING + "1" + "}" * MAX_NESTING
    assert parse_machine(headers("join") + f"\n(w, sep={objects}) -> join -> x", CAPS)
    for depth in (MAX_NESTING + 1, 5000):
        with pytest.raises(MachineError) as caught:
            parse_machine(text(depth), CAPS)
        assert caught.value.kind == "ParseError"
        assert (caught.value.line, caught.value.column) == (2, 9 + MAX_NESTING)
        assert f"at most {MAX_NESTING} deep" in caught.value.message
