"""Outputs held to their media definitions when they end (HST-24): calls, streamed responses,
machines; definitions from the application and from the manifest; the three ways to turn it
off; an error result never checked."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from cartridge_runtime.engine import (
    CallError,
    Engine,
    MachineRunError,
    OutputInvalid,
)
from cartridge_runtime.machine import MediaDef, MediaValidation
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, OpError, WetContext

TEXT = "media:enc=utf-8"
THING = "media:fmt=json;record;thing"
SCORE = "media:fmt=json;numeric;score"
NAME = "media:enc=utf-8;name"
#: Gives its input text back as a JSON record of media THING.
MAKE = f'cap:in="{TEXT}";op=make;out="{THING}"'
#: Gives its input text back as a sequence of THING items, one per line.
ITEMS = f'cap:in="{TEXT}";op=items;out="{THING}"'
#: Gives its input text back as a SCORE.
RATE = f'cap:in="{TEXT}";op=rate;out="{SCORE}"'
#: Gives its input text back as a NAME (text with a pattern rule).
NAMED = f'cap:in="{TEXT}";op=named;out="{NAME}"'
#: Fails with an ERR whatever its input.
FAIL = f'cap:in="{TEXT}";op=fail;out="{THING}"'
#: Takes a THING record, gives back its ``name`` as text.
PICK = f'cap:in="{THING}";op=pick;out="{TEXT}"'

THING_SCHEMA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
THING_DEF = {
    "urn": THING,
    "media_type": "application/json",
    "title": "Thing",
    "schema": THING_SCHEMA,
}
SCORE_DEF = MediaDef(urn=SCORE, validation=MediaValidation(min=0, max=10))
NAME_DEF = MediaDef(urn=NAME, validation=MediaValidation(pattern="^[a-z]+$"))


async def _text(wet: WetContext) -> str:
    return (await wet.request.take_input().collect_all_bytes()).decode()


class Make(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().write((await _text(wet)).encode())


class Items(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        for line in (await _text(wet)).splitlines():
            await out.emit_list_item(line.encode())


class Fail(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _text(wet)
        raise OpError("no thing today")


class Pick(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().write(json.loads(await _text(wet))["name"].encode())


def runtime(media_defs: list[dict[str, Any]] | None = None) -> CartridgeRuntime:
    caps = [
        CapDef.simple(MAKE, "Make", aliases="make"),
        CapDef.simple(ITEMS, "Items", aliases="items", output_is_sequence=True),
        CapDef.simple(RATE, "Rate", aliases="rate"),
        CapDef.simple(NAMED, "Named", aliases="named"),
        CapDef.simple(FAIL, "Fail", aliases="fail"),
        CapDef.simple(PICK, "Pick", aliases="pick"),
    ]
    manifest = Manifest.build(
        name="things",
        version="1.0.0",
        description="Outputs for schema checks",
        caps=caps,
        media_defs=media_defs or (),
    )
    rt = CartridgeRuntime(manifest)
    for urn, op in (
        (MAKE, Make),
        (ITEMS, Items),
        (RATE, Make),
        (NAMED, Make),
        (FAIL, Fail),
        (PICK, Pick),
    ):
        rt.register_op(urn, op)
    return rt


def engine(
    *, media: Any = (THING_DEF, SCORE_DEF, NAME_DEF), shipped: Any = None, **config: Any
) -> tuple[Engine, str]:
    eng = Engine(media=media, **config)
    name = eng.add_cartridge(runtime(shipped))
    return eng, name


@pytest.mark.asyncio
async def test_an_output_that_fits_its_schema_passes() -> None:
    eng, _ = engine()
    async with eng:
        result = await eng.call(MAKE, [(TEXT, '{"name": "lamp", "tags": ["a"]}')])
    assert json.loads(result.data) == {"name": "lamp", "tags": ["a"]}


@pytest.mark.asyncio
async def test_an_output_that_breaks_its_schema_fails_with_the_pointer_of_the_first_failure() -> (
    None
):
    eng, _ = engine()
    async with eng:
        with pytest.raises(OutputInvalid) as caught:
            await eng.call(MAKE, [(TEXT, '{"name": "lamp", "tags": ["a", 7]}')])
    error = caught.value
    assert (error.code, error.attribution_class) == ("OUTPUT_INVALID", "internal")
    assert (error.pointer, error.rule, error.item, error.step) == ("/tags/1", "type", None, None)
    assert error.output is None and error.media_urn == THING
    assert error.message.endswith("at '/tags/1': type")
    assert "lamp" not in error.message  # where and which rule, never the value
    restored = pickle.loads(pickle.dumps(error))
    assert type(restored) is OutputInvalid and restored.pointer == "/tags/1"


@pytest.mark.asyncio
async def test_a_missing_required_key_and_text_that_is_not_json() -> None:
    eng, _ = engine()
    async with eng:
        with pytest.raises(OutputInvalid) as missing:
            await eng.call(MAKE, [(TEXT, '{"tags": []}')])
        with pytest.raises(OutputInvalid) as garbled:
            await eng.call(MAKE, [(TEXT, "{not json")])
    assert (missing.value.pointer, missing.value.rule) == ("", "required")
    assert garbled.value.rule == "the value is not JSON"


@pytest.mark.asyncio
async def test_the_references_rules_min_max_and_pattern() -> None:
    eng, _ = engine()
    async with eng:
        assert (await eng.call(RATE, [(TEXT, "7")])).data == b"7"
        with pytest.raises(OutputInvalid) as high:
            await eng.call(RATE, [(TEXT, "11")])
        assert (await eng.call(NAMED, [(TEXT, "lamp")])).data == b"lamp"
        with pytest.raises(OutputInvalid) as shouted:
            await eng.call(NAMED, [(TEXT, "LAMP")])
    assert high.value.rule == "maximum value 10"
    assert shouted.value.rule == "pattern '^[a-z]+$'"


@pytest.mark.asyncio
async def test_each_item_of_a_sequence_output_is_checked_and_the_item_named() -> None:
    eng, _ = engine()
    async with eng:
        ok = await eng.call(ITEMS, [(TEXT, '{"name": "a"}\n{"name": "b"}')])
        assert len(ok.items) == 2
        with pytest.raises(OutputInvalid) as caught:
            await eng.call(ITEMS, [(TEXT, '{"name": "a"}\n{"name": 2}\n{}')])
    assert (caught.value.item, caught.value.pointer, caught.value.rule) == (1, "/name", "type")


@pytest.mark.asyncio
async def test_a_streamed_response_fails_when_the_output_ends() -> None:
    eng, _ = engine()
    seen: list[str] = []
    async with eng:
        with pytest.raises(OutputInvalid) as caught:
            async with eng.call(MAKE, [(TEXT, '{"name": 1}')]) as response:
                async for event in response:
                    seen.append(type(event).__name__)
    assert caught.value.pointer == "/name"
    assert "OutputStarted" in seen and "OutputEnded" not in seen  # raised at the end


@pytest.mark.asyncio
async def test_an_error_result_is_not_checked() -> None:
    eng, _ = engine()
    async with eng:
        with pytest.raises(CallError) as caught:
            await eng.call(FAIL, [(TEXT, "x")])
    assert not isinstance(caught.value, OutputInvalid)
    assert caught.value.message == "no thing today"


@pytest.mark.asyncio
async def test_definitions_shipped_in_the_manifest_apply_and_the_applications_win() -> None:
    strict = {"urn": THING, "schema": {"type": "object", "required": ["name", "size"]}}
    # Only the manifest's definition: it applies.
    eng, _ = engine(media=(), shipped=[strict])
    async with eng:
        with pytest.raises(OutputInvalid) as caught:
            await eng.call(MAKE, [(TEXT, '{"name": "lamp"}')])
    assert caught.value.rule == "required"
    # The application's definition of the same URN wins over it.
    eng, _ = engine(shipped=[strict])
    async with eng:
        await eng.call(MAKE, [(TEXT, '{"name": "lamp"}')])


@pytest.mark.asyncio
async def test_the_check_is_turned_off_per_engine_per_cartridge_and_per_call() -> None:
    bad = [(TEXT, '{"name": 1}')]
    eng, _ = engine(check_outputs=False)
    async with eng:
        await eng.call(MAKE, bad)
    eng = Engine(media=(THING_DEF,))
    eng.add_cartridge(runtime(), check_outputs=False)
    async with eng:
        await eng.call(MAKE, bad)
    eng, _ = engine()
    async with eng:
        await eng.call(MAKE, bad, check_outputs=False)
        async with eng.call(MAKE, bad, check_outputs=False) as response:
            async for _ in response:
                pass
        with pytest.raises(OutputInvalid):
            await eng.call(MAKE, bad)


@pytest.mark.asyncio
async def test_without_definitions_a_call_carries_no_checker() -> None:
    eng, _ = engine(media=())
    async with eng, eng.call(MAKE, [(TEXT, '{"name": 1}')]) as response:
        assert response._watch is None
        await response.collect()


@pytest.mark.asyncio
async def test_a_machine_step_whose_output_breaks_its_schema_names_the_step() -> None:
    eng, _ = engine()
    text = f"make {MAKE}\npick {PICK}\n(input=src) -> make -> thing\n(input=thing) -> pick -> out"
    async with eng:
        with pytest.raises(MachineRunError) as caught:
            await eng.run_machine(text, {"src": '{"name": 3}'})
    error = caught.value
    assert error.step == "make" and error.item is None
    assert isinstance(error.cause, OutputInvalid)
    assert (error.cause.step, error.cause.pointer) == ("make", "/name")
    assert error.code == "OUTPUT_INVALID"


@pytest.mark.asyncio
async def test_a_graph_node_whose_output_breaks_its_schema_fails_and_its_readers_skip() -> None:
    from cartridge_runtime.graph import NodeState

    eng, _ = engine()
    async with eng, eng.graph() as g:
        good = g.instantiate_with_deps(MAKE, {TEXT: g.add_value_node('{"name": "a"}', media=TEXT)})
        bad = g.instantiate_with_deps(MAKE, {TEXT: g.add_value_node('{"tags": [1]}', media=TEXT)})
        reader = g.instantiate_with_deps(PICK, {THING: bad})
        result = await g.run()
    assert result[good].state is NodeState.DONE
    assert result[bad].state is NodeState.FAILED and result[reader].state is NodeState.SKIPPED
    error = result[bad].error
    assert isinstance(error, OutputInvalid) and error.code == "OUTPUT_INVALID"
    assert error.pointer == "" and error.rule == "required"
