"""Every way a machine is refused, each reached by a text: the kind (the reference's error
class name), the family, the rule, where (line and column), and that the message names the
step, arg, output or node at fault (protocol_spec/12-machines.md, MCH-1 .. MCH-10). Then the
includes: through a mapping and through files, the failures and the machines that work.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from _machine_refusals import SUBS, TABLE, WU
from _machine_world import CAPS, UPPER, headers

from cartridge_runtime.machine import (
    FileMachineSource,
    MachineBuilder,
    MachineError,
    MappingMachineSource,
    _errors,
    parse_machine,
)

H = headers


@pytest.mark.parametrize(
    ("kind", "text", "line", "column", "names"),
    TABLE,
    ids=[f"{row[0]}-{i}" for i, row in enumerate(TABLE)],
)
def test_refusal(kind: str, text: str, line: int | None, column: int | None,
                 names: list[str]) -> None:  # fmt: skip
    source = None if kind == "MachineReferenceWithoutSourceError" else MappingMachineSource(SUBS)
    with pytest.raises(MachineError) as caught:
        parse_machine(text, CAPS, source=source)
    error = caught.value
    assert error.kind == kind
    assert type(error) is getattr(_errors, kind)
    assert error.line == line
    if column is not None:
        assert error.column == column
    if line is not None:
        assert f"line {line}, column {error.column}" in str(error)
    for name in names:
        assert name in error.message
    assert str(error).endswith(f"[{error.rule}]")
    assert "\n" not in str(error)
    # An error crosses a process boundary whole.
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.line) == (type(error), str(error), error.line)


def test_every_error_kind_is_reached() -> None:
    reached = (
        {row[0] for row in TABLE}
        | {
            "AliasNotACapError",  # test_an_alias_that_is_not_a_cap
            "InvalidMediaUrnError",  # test_the_builder_refuses_a_media_urn_that_does_not_parse
            "ConstantFailsValidationError",  # tests/machine/test_machine_media.py, with media definitions
        }
    )
    # The families and the root are not failures of their own.
    abstract = {"MachineError", "MachineSyntaxError", "MachineAbstractionError"}
    assert set(_errors.__all__) - abstract == reached


def test_families() -> None:
    for name in _errors.__all__:
        cls = getattr(_errors, name)
        assert issubclass(cls, MachineError)
        assert cls.rule.startswith("MCH-")
        if issubclass(cls, _errors.MachineSyntaxError):
            assert cls.family == "syntax"
        else:
            assert cls.family == "abstraction"


def test_an_alias_that_is_not_a_cap() -> None:
    text = "doc -> shout -> loud"
    with pytest.raises(_errors.AliasNotACapError) as caught:
        parse_machine(text, CAPS, aliases={"shout": "media:enc=utf-8"})
    assert caught.value.kind == "AliasNotACapError"
    assert (caught.value.line, caught.value.column) == (1, 1)
    assert "'shout'" in caught.value.message and "media:enc=utf-8" in caught.value.message


def test_an_alias_that_is_a_cap_defines_a_step() -> None:
    machine = parse_machine("w -> shout -> loud", CAPS, aliases={"shout": UPPER})
    assert machine == parse_machine(H("upper") + "\nw -> upper -> loud", CAPS)
    assert machine.step("shout").label == "shout"
    # A header wins over the alias table.
    other = parse_machine(H("upper") + "\nw -> upper -> loud", CAPS, aliases={"upper": "nope"})
    assert other == machine


def test_the_builder_refuses_a_media_urn_that_does_not_parse() -> None:
    with pytest.raises(_errors.InvalidMediaUrnError) as caught:
        MachineBuilder(CAPS).value("doc", media="not a urn")
    assert caught.value.kind == "InvalidMediaUrnError" and "'doc'" in caught.value.message


def test_any_json_constant_is_accepted() -> None:
    # No media definition carries rules here, so no constant fails validation.
    for constant in ('"x"', "1", "-2.5e-7", '[1, {"a": null}]', '"\\u00e9\\ud83d\\ude00"'):
        machine = parse_machine(H("join") + f"\n(ws, sep={constant}) -> join -> t", CAPS)
        assert machine.steps[0].bindings[0].is_constant


# -- includes that work -------------------------------------------------------------------


def test_an_included_machine_is_written_in() -> None:
    text = (H("join") + "\n" + WU + "(text=doc) -> sub -> l\n"
            '(l, sep=" ") -> join -> out\n(text=doc2) -> sub -> l2')  # fmt: skip
    machine = parse_machine(text, CAPS, source=MappingMachineSource(SUBS))
    assert [s.included_as for s in machine.steps] == [("sub#1",), ("sub#1",), (), ("sub#2",),
                                                       ("sub#2",)]  # fmt: skip
    assert [s.label for s in machine.steps] == [None, None, "join", None, None]
    labels = [n.label for n in machine.nodes]
    assert labels == ["doc", "sub#1/ws", "l", "out", "doc2", "sub#2/ws", "l2"]
    assert machine.step("edge_1").placement.per_item
    # The same machine, written out by hand.
    by_hand = parse_machine(
        H("words", "upper", "join")
        + '\ndoc -> words -> a\na -> upper -> l\n(l, sep=" ") -> join -> out\n'
        "doc2 -> words -> b\nb -> upper -> l2",
        CAPS,
    )
    assert machine == by_hand
    assert machine.to_notation() == by_hand.to_notation()


def test_nested_includes() -> None:
    machines = {**SUBS, "outer": WU + "(text=t) -> sub -> (loud=o)"}
    text = 'top machine "outer"\n(t=doc) -> top -> res'
    machine = parse_machine(text, CAPS, source=MappingMachineSource(machines))
    assert [s.included_as for s in machine.steps] == [("top#1", "sub#1")] * 2
    assert [n.label for n in machine.inputs] == ["doc"]
    assert [n.label for n in machine.outputs] == ["res"]


def test_file_includes_resolve_relative_to_the_including_file(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "wu.machine").write_text(SUBS["words-upper"])
    (tmp_path / "lib" / "outer.machine").write_text(
        'sub machine "wu.machine"\n(text=t) -> sub -> (loud=o)'
    )
    main = tmp_path / "main.machine"
    main.write_text('top machine "lib/outer.machine"\n(t=doc) -> top -> res')
    source = FileMachineSource(tmp_path)
    machine = parse_machine(main.read_text(), CAPS, source=source, origin=str(main.resolve()))
    assert len(machine.steps) == 2
    # Text from no file reads references relative to the base.
    again = parse_machine('top machine "lib/outer.machine"\n(t=doc) -> top -> res', CAPS,
                          source=source)  # fmt: skip
    assert again == machine


def test_file_include_failures(tmp_path: Path) -> None:
    (tmp_path / "a.machine").write_text('sub machine "b.machine"\nx -> sub -> y')
    (tmp_path / "b.machine").write_text('sub machine "a.machine"\nx -> sub -> y')
    (tmp_path / "bad.machine").write_text("x -> nothing -> y")
    (tmp_path / "binary.machine").write_bytes(b"\xff\xfe\x00")
    source = FileMachineSource(tmp_path)
    cases = [
        ('s machine "a.machine"\nd -> s -> o', _errors.CyclicMachineReferenceError, "a.machine"),
        ('s machine "missing.machine"\nd -> s -> o', _errors.UnknownMachineReferenceError,
         "missing.machine"),
        ('s machine "binary.machine"\nd -> s -> o', _errors.UnknownMachineReferenceError,
         "binary.machine"),
        ('s machine "bad.machine"\nd -> s -> o', _errors.InvalidIncludedMachineError,
         "'nothing'"),
    ]  # fmt: skip
    for text, kind, named in cases:
        with pytest.raises(kind) as caught:
            parse_machine(text, CAPS, source=source)
        assert named in caught.value.message
        assert (caught.value.line, caught.value.column) == (1, 1)
    # A file that includes itself is a circle from its first line.
    me = tmp_path / "me.machine"
    me.write_text('s machine "me.machine"\nd -> s -> o')
    with pytest.raises(_errors.CyclicMachineReferenceError):
        parse_machine(me.read_text(), CAPS, source=source, origin=str(me.resolve()))


def test_an_invalid_included_machine_keeps_its_cause() -> None:
    with pytest.raises(_errors.InvalidIncludedMachineError) as caught:
        parse_machine('sub machine "bad"\ndoc -> sub -> x', CAPS, source=MappingMachineSource(SUBS))
    cause = caught.value.cause
    assert isinstance(cause, _errors.UndefinedAliasError)
    assert (cause.line, cause.column) == (1, 1)


@pytest.mark.parametrize(
    ("policy", "why"),
    [
        ("retry=-1", "whole number"),
        ("retry=1.5", "whole number"),
        ("retry=4294967296", "at most"),
        ("on_error=fail", "'absent'"),
    ],
)
def test_policy_values(policy: str, why: str) -> None:
    with pytest.raises(_errors.InvalidPolicyError) as caught:
        parse_machine(H("words") + f"\ndoc -> words{{{policy}}} -> ws", CAPS)
    assert why in caught.value.message and caught.value.line == 2


def test_the_spec_table_names_every_kind_with_its_family_and_rule() -> None:
    import re

    chapter = Path(__file__).resolve().parents[2] / "protocol_spec" / "12-machines.md"
    rows = re.findall(r"^\| `(\w+)` \| (syntax|abstraction) \| (MCH-\d+) \|$",
                      chapter.read_text(encoding="utf-8"), re.MULTILINE)  # fmt: skip
    table = {kind: (family, rule) for kind, family, rule in rows}
    assert len(table) == len(rows)
    kinds = [name for name in _errors.__all__
             if name not in {"MachineError", "MachineSyntaxError", "MachineAbstractionError"}]  # fmt: skip
    assert set(table) == set(kinds)
    for kind in kinds:
        cls = getattr(_errors, kind)
        assert table[kind] == (cls.family, cls.rule), kind
