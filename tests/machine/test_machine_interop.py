"""Machines read by us and by the reference (capdag 1.524.58, test-only): generated machines
have the same canonical forms, texts with faults are refused with the same error kind, and
includes through a mapping source are written in alike (protocol_spec/12-machines.md).

The reference reads a registry; ``_machine_world.ReferenceRegistry`` gives it the world the
machine vectors assume: the caps, no cap aliases, every media URN defined without rules.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from _machine_gen import plans, texts
from _machine_refusals import SUBS, TABLE, WU
from _machine_world import CAP_JSON, CAPS, headers, reference_notation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.machine import MachineError, MappingMachineSource, parse_machine

pytestmark = pytest.mark.interop

SOME: Final = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ALPHABET: Final = st.sampled_from([*'[](){}=,->"\\: \n\t;_-aAzZ09.eE+', "é", "😀"])


def ours(text: str, machines: dict[str, str] | None = None) -> Any:
    """Our (line, bracketed) canonical texts, or the kind of the refusal."""
    source = MappingMachineSource(machines) if machines is not None else None
    try:
        machine = parse_machine(text, CAPS, source=source)
    except MachineError as error:
        return error.kind
    return machine.to_notation(), machine.to_notation(bracketed=True)


def reference(text: str, machines: dict[str, str] | None = None) -> Any:
    return reference_notation(text, CAP_JSON, machines)


def test_the_reference_reads_our_world() -> None:
    text = headers("words", "upper") + "\ndoc -> words -> ws\nws -> upper -> loud"
    answer = reference(text)
    assert isinstance(answer, tuple)
    assert answer == ours(text)


@SOME
@given(st.data())
def test_generated_machines_have_the_reference_canonical_forms(data: st.DataObject) -> None:
    text = data.draw(texts(data.draw(plans())))
    mine = ours(text)
    assert isinstance(mine, tuple), mine
    assert mine == reference(text)


@SOME
@given(st.data())
def test_texts_with_faults_are_refused_alike(data: st.DataObject) -> None:
    text = data.draw(texts(data.draw(plans(max_steps=4))))
    at = data.draw(st.integers(0, len(text)))
    how = data.draw(st.sampled_from(["cut", "put", "drop"]))
    if how == "cut":
        text = text[:at]
    elif how == "put":
        text = text[:at] + data.draw(ALPHABET) + text[at:]
    else:
        text = text[:at] + text[at + 1 :]
    assert ours(text) == reference(text)


@pytest.mark.parametrize(
    ("kind", "text"), [(row[0], row[1]) for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_every_refusal_of_the_table_is_the_reference_refusal(kind: str, text: str) -> None:
    machines = None if kind == "MachineReferenceWithoutSourceError" else SUBS
    assert ours(text, machines) == kind
    assert reference(text, machines) == kind


INCLUDES: Final = [
    WU + "(text=doc) -> sub -> out",
    WU + "(text=doc) -> sub -> (loud=out)",
    headers("join") + "\n" + WU + '(text=doc) -> sub -> l\n(l, sep=" ") -> join -> out\n'
    "(text=doc2) -> sub -> l2",
    headers("count") + "\n" + WU + "(text=doc) -> sub -> l\ndoc -> count -> n",
    'sub machine "two-in"\n(a=x, b=y) -> sub -> o',
    'sub machine "two-out"\n(t=doc) -> sub -> (h=head, s=stats)',
    'sub machine "two-out"\n(t=doc) -> sub -> (s=stats)',
    'sub machine "same-in"\n(x=a, y=b) -> sub -> (n=o1, m=o2)',
    headers("split") + '\nsub machine "words-upper"\nd -> split -> h\nh -> sub -> o',
    'top machine "outer"\n(t=doc) -> top -> res',
    '[top machine "outer"][(t=doc) -> top{} -> res]',
]  # fmt: skip


@pytest.mark.parametrize("text", INCLUDES)
def test_included_machines_are_written_in_alike(text: str) -> None:
    machines = {**SUBS, "outer": WU + "(text=t) -> sub -> (loud=o)"}
    mine = ours(text, machines)
    assert isinstance(mine, tuple), mine
    assert mine == reference(text, machines)


@SOME
@given(st.data())
def test_generated_includes_are_written_in_alike(data: st.DataObject) -> None:
    inner = data.draw(texts(data.draw(plans(max_steps=5))))
    sub = parse_machine(inner, CAPS)
    inputs = [node.label for node in sub.inputs]
    outputs = [node.label for node in sub.outputs]
    lines = ['sub machine "p"']
    for use in range(data.draw(st.integers(1, 2))):
        taken = data.draw(st.lists(st.sampled_from(outputs), unique=True)) if outputs else []
        members = ", ".join(f"{name}=u{use}x{k}" for k, name in enumerate(inputs))
        targets = ", ".join(f"{name}=u{use}y{k}" for k, name in enumerate(taken))
        lines.append(f"({members}) -> sub -> ({targets})")
    text = "\n".join(lines)
    mine = ours(text, {"p": inner})
    assert isinstance(mine, tuple), mine
    assert mine == reference(text, {"p": inner})
