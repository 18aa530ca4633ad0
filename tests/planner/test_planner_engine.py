"""A plan runs: the machine of the best plan, run by the engine on an in-process cartridge,
turns the source into the target type."""

from __future__ import annotations

from typing import Final

import pytest

from cartridge_runtime.engine import Engine
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.planner import best_path, find_paths
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
LOUD: Final = "media:enc=utf-8;loud;word"
SPLIT: Final = f'cap:in="{TEXT}";op=split;out="{WORD}"'
SHOUT: Final = f'cap:in="{WORD}";op=shout;out="{LOUD}"'


class Split(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = await wet.request.take_input().require_stream_str(TEXT)
        out = wet.request.output()
        await out.start(is_sequence=True)
        for word in text.split():
            await out.emit_text(word)


class Shout(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        word = await wet.request.take_input().require_stream_str(WORD)
        await wet.request.output().emit_text(word.upper() + "!")


def word_runtime() -> CartridgeRuntime:
    caps = [
        CapDef.simple(SPLIT, "split", aliases="split", input_name="text",
                      output_name="words", output_is_sequence=True),
        CapDef.simple(SHOUT, "shout", aliases="shout", input_name="word", output_name="loud"),
    ]  # fmt: skip
    manifest = Manifest.build(name="words", version="1.0.0", description="Words", caps=caps)
    runtime = CartridgeRuntime(manifest)
    runtime.register_op(SPLIT, Split)
    runtime.register_op(SHOUT, Shout)
    return runtime


@pytest.mark.asyncio
async def test_the_best_plan_runs_and_gives_the_target_type() -> None:
    runtime = word_runtime()
    plan = best_path(runtime.manifest, TEXT, LOUD)
    assert plan.description == "split → ForEach → shout"
    assert [step.per_item for step in plan.cap_steps] == [False, True]
    async with Engine() as engine:
        engine.add_cartridge(runtime)
        result = await engine.run_machine(plan.machine, {"n0": "plan and run"})
    (output,) = result.outputs.values()
    assert output.media_urn == LOUD
    assert [item.value for item in output.items] == [b"PLAN!", b"AND!", b"RUN!"]


def test_the_plans_of_a_manifest_are_those_of_its_caps() -> None:
    runtime = word_runtime()
    caps = runtime.manifest.all_caps()
    assert find_paths(runtime.manifest, TEXT, LOUD) == find_paths(caps, TEXT, LOUD)
