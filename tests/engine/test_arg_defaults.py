"""A declared ``default_value`` reaches the handler whoever calls: the pure planning step,
``Engine.call``, a machine's step, the test harness and CLI mode all give the same bytes."""

from __future__ import annotations

import io
from typing import Any

import pytest

from cartridge_runtime.engine import Engine, InProcess
from cartridge_runtime.engine._arguments import ArgumentError, plan_call_inputs
from cartridge_runtime.manifest import ArgDef, CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, Request
from cartridge_runtime.runtime._cli._args import StdinReader, plan_invocations
from cartridge_runtime.testing import CartridgeHarness

TEXT = "media:enc=utf-8"
SEP = "media:enc=utf-8;sep"
TIMES = "media:enc=utf-8;times"
FLAGS = "media:enc=utf-8;flags"
CAP = 'cap:in="media:enc=utf-8";op=repeat;out="media:enc=utf-8"'

DEF = CapDef.simple(
    CAP,
    "Repeat",
    aliases="repeat",
    input_name="text",
    extra_args=[
        ArgDef.flag(SEP, "--sep", name="sep", default_value="-"),
        ArgDef.flag(TIMES, "--times", name="times", required=True, default_value=2),
        ArgDef.flag(FLAGS, "--flags", name="flags", default_value=[True, None]),
    ],
)


def build_runtime() -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(name="repeat", version="1.0.0", description="repeat", caps=[DEF])
    )

    @runtime.op(CAP)
    async def repeat(req: Request) -> None:
        package = req.take_input()
        text = await package.require_stream_str(TEXT)
        sep = await package.find_stream_str(SEP)
        times = await package.find_stream_str(TIMES)
        flags = await package.find_stream_str(FLAGS)
        await req.output().emit_text(f"{text}|{sep}|{times}|{flags}")

    return runtime


def test_planning_adds_each_missing_default_as_its_typed_bytes() -> None:
    planned = plan_call_inputs(CAP, DEF, [(TEXT, b"x")])
    assert planned == [(TEXT, b"x"), (SEP, b"-"), (TIMES, b"2"), (FLAGS, b"[true, null]")]


def test_planning_keeps_what_was_given() -> None:
    given: list[tuple[str, Any]] = [(TEXT, b"x"), (TIMES, b"5"), (SEP, b"+")]
    assert plan_call_inputs(CAP, DEF, given) == [*given, (FLAGS, b"[true, null]")]


def test_planning_still_refuses_what_does_not_fit() -> None:
    with pytest.raises(ArgumentError):
        plan_call_inputs(CAP, DEF, [(TEXT, b"x"), ("media:ext=pdf", b"%PDF")])


def test_a_definition_without_arguments_is_left_alone() -> None:
    bare = CapDef(urn="cap:op=bare", title="Bare", aliases="bare")
    assert plan_call_inputs("cap:op=bare", bare, [("media:x", b"1")]) == [("media:x", b"1")]


EXPECTED = b"ab|-|2|[true, null]"


@pytest.mark.asyncio
async def test_engine_call_applies_the_defaults() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        result = await engine.call(CAP, [(TEXT, b"ab")])
        assert result.data == EXPECTED
        given = await engine.call(CAP, [(TEXT, b"ab"), (TIMES, b"3")])
        assert given.data == b"ab|-|3|[true, null]"


@pytest.mark.asyncio
async def test_a_machine_step_gets_the_defaults() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        result = await engine.run_machine(f"rep {CAP}\ndoc -> rep -> out", {"doc": b"ab"})
    assert result.outputs["out"].data == EXPECTED


@pytest.mark.asyncio
async def test_the_harness_applies_the_defaults() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        result = await h.call(CAP, [(TEXT, b"ab")])
        assert result.main_bytes == EXPECTED
        # the harness still sends what it is told, even what the definition refuses
        odd = await h.call(CAP, [(TEXT, b"ab"), ("media:ext=pdf", b"%PDF")])
        assert odd.main_bytes == EXPECTED


def test_cli_mode_gives_the_same_bytes() -> None:
    [inputs] = plan_invocations(DEF, [], StdinReader(io.BytesIO(b"ab"), is_tty=False))
    by_urn = {i.media_urn: i.data for i in inputs if i.data is not None}
    assert by_urn == {SEP: b"-", TIMES: b"2", FLAGS: b"[true, null]"}


def test_help_says_the_default_is_used_when_not_given() -> None:
    from cartridge_runtime.runtime._cli._args import cap_help

    text = cap_help(DEF, "repeat.py")
    assert 'default: "-" (used when not given, by every caller)' in text


def test_a_repeated_plan_gives_the_same_answer_and_refuses_again() -> None:
    # The second plan of a shape is remembered: same defaults, still a fresh list each time.
    first = plan_call_inputs(CAP, DEF, [(TEXT, b"x")])
    again = plan_call_inputs(CAP, DEF, [(TEXT, b"y")])
    assert again == [(TEXT, b"y"), (SEP, b"-"), (TIMES, b"2"), (FLAGS, b"[true, null]")]
    assert again is not first
    # A list is another shape: refused every time, even after the single value fitted.
    for _ in range(2):
        with pytest.raises(ArgumentError, match="takes one value"):
            plan_call_inputs(CAP, DEF, [(TEXT, [b"a", b"b"])])
    # Another definition with the same URN is planned on its own.
    other = CapDef.simple(CAP, "Repeat", aliases="repeat", input_name="text")
    assert plan_call_inputs(CAP, other, [(TEXT, b"x")]) == [(TEXT, b"x")]
    # A missing required argument is refused whatever was planned before.
    times_only = [(TIMES, b"3")]
    for _ in range(2):
        with pytest.raises(ArgumentError, match="required"):
            plan_call_inputs(CAP, DEF, times_only)
