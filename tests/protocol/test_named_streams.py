"""Streams by argument name and outputs by output name, resolved through the
cap definition; the wire still carries only media URNs."""

from __future__ import annotations

import pytest

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import (
    BlockingRequest,
    CartridgeRuntime,
    MissingInput,
    Request,
    UnknownArgument,
    UnknownOutput,
)
from cartridge_runtime.testing import call_sync

TEXT = "media:enc=utf-8"
PRED = "media:enc=utf-8;predicate"
TAG = "media:enc=utf-8;tag"
DROPPED = "media:dropped;enc=utf-8;list"
FILTER = 'cap:in="media:enc=utf-8";op=filter;out="media:enc=utf-8"'
SYNC = 'cap:in="media:enc=utf-8";op=filter-sync;out="media:enc=utf-8"'


def _def(urn: str) -> CapDef:
    return CapDef.simple(
        urn,
        "Filter",
        aliases=urn.split("op=")[1].split(";")[0],
        input_name="text",
        extra_args=[
            ArgDef.flag(PRED, "--predicate", name="predicate"),
            ArgDef.flag(TAG, "--tag", name="tag", is_sequence=True),
        ],
        extra_outputs=[
            OutputDef(
                media_urn=DROPPED,
                name="dropped",
                output_description="lines dropped",
                optional=True,
                is_sequence=True,
            )
        ],
    )


def _runtime() -> CartridgeRuntime:
    manifest = Manifest.build(
        name="named", version="1.0.0", description="named", caps=[_def(FILTER), _def(SYNC)]
    )
    runtime = CartridgeRuntime(manifest)
    seen: dict[str, object] = {}

    @runtime.op(FILTER)
    async def filt(req: Request) -> None:
        package = req.take_input()
        text = await (await package.require("text")).collect_str()
        word = await (await package.require("predicate")).collect_str()
        second_tag = await package.find("tag", 1)
        seen["second_tag"] = None if second_tag is None else await second_tag.collect_str()
        seen["tags"] = [s.media_urn for s in await package.streams_of("tag")]
        assert await package.find("tag", 5) is None
        kept = [line for line in text.splitlines() if word in line]
        await req.output().emit_cbor("\n".join(kept))
        dropped = req.output_for("dropped")
        assert dropped is req.output_for(DROPPED)
        assert req.output_for("output") is req.output()
        for line in text.splitlines():
            if word not in line:
                await dropped.emit_list_item(line)
        for bad in ("nope", "media:nope"):
            with pytest.raises(UnknownOutput) as info:
                req.output_for(bad)
            assert "dropped" in str(info.value)
        with pytest.raises(UnknownArgument) as arg_info:
            await package.find("nope")
        assert "'predicate'" in str(arg_info.value)

    @runtime.op(SYNC)
    def filt_sync(req: BlockingRequest) -> None:
        package = req.take_input()
        word = package.require("predicate").collect_str()
        tags = [s.collect_str() for s in package.streams_of("tag")]
        req.output().emit_cbor(f"{word}:{','.join(tags)}")
        with pytest.raises(MissingInput) as info:
            package.require("tag", 2)
        assert info.value.name == "tag" and info.value.index == 2
        assert info.value.arg_urn == TAG
        assert "'tag'" in str(info.value)

    runtime.seen = seen  # type: ignore[attr-defined]
    return runtime


INPUTS = [(TEXT, b"apple pie\nbanana\napple tart"), (PRED, b"apple"), (TAG, b"t1"), (TAG, b"t2")]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_streams_and_outputs_by_name(backend: str) -> None:
    runtime = _runtime()
    result = call_sync(runtime, FILTER, INPUTS, backend=backend)
    assert result.ok, result.error
    assert result.main_bytes == b"apple pie\napple tart"
    dropped = result.output(DROPPED)
    assert dropped is not None and [i.value for i in dropped.items] == ["banana"]
    assert runtime.seen == {"second_tag": "t2", "tags": [TAG, TAG]}  # type: ignore[attr-defined]


def test_a_blocking_handler_looks_up_by_name() -> None:
    result = call_sync(_runtime(), SYNC, INPUTS)
    assert result.ok, result.error
    assert result.main_bytes == b"apple:t1,t2"


def test_a_missing_named_argument_names_it_on_the_wire() -> None:
    result = call_sync(_runtime(), FILTER, [(TEXT, b"x")])
    assert not result.ok
    assert result.error is not None
    assert result.error.code == "MISSING_INPUT"
    assert result.error.arg_urn == PRED
    assert "'predicate'" in result.error.message
