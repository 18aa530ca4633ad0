"""A cartridge with one cap per runtime feature, for the in-process runtime tests."""

from __future__ import annotations

import json

import anyio

from cartridge_runtime.manifest import ArgDef, CapDef, CliFlagSource, Manifest, OutputDef
from cartridge_runtime.runtime import (
    CartridgeRuntime,
    DryContext,
    Op,
    OpError,
    Reach,
    Request,
    WetContext,
)

ECHO = "cap:in=media:;op=echo;out=media:"
WORDS = 'cap:in="media:enc=utf-8";op=words;out="media:enc=utf-8;list"'
FAIL = "cap:in=media:;op=fail;out=media:void"
BOOM = "cap:in=media:;op=boom;out=media:"
SINK = "cap:in=media:;op=sink;out=media:void"
EMPTY = "cap:in=media:;op=empty;out=media:"
MULTI = 'cap:in="media:enc=utf-8";op=multi;out="media:enc=utf-8"'
SIDE = "media:side;enc=utf-8"
OPTIONAL = "media:enc=utf-8;optional-side"
PROGRESS = 'cap:in=media:;op=progress;out="media:enc=utf-8"'
SLOW = "cap:in=media:;op=slow;out=media:"
TWICE = "cap:in=media:;op=twice;out=media:"
UNDECLARED = "cap:in=media:;op=undeclared;out=media:"
REQUIRE = "cap:in=media:;op=require;out=media:"
CONCAT = 'cap:in="media:first";op=concat;out=media:'
SECOND = "media:second"
UNBOUNDED = "cap:in=media:;op=unbounded;out=media:"
SYNC = "cap:in=media:;op=sync-upper;out=media:"
PEER = "cap:in=media:;op=peer-echo;out=media:"
NET = 'cap:in=media:;op=net;out="media:enc=utf-8"'
VALUE = 'cap:in=media:;op=value;out="media:fmt=json;record"'
FAILAFTER = "cap:in=media:;op=fail-after;out=media:"
META = "cap:in=media:;op=meta;out=media:"


class BadPage(OpError):
    code = "BAD_PAGE"
    attribution_class = "input"


class Echo(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        out = req.output()
        async for stream in req.take_input():
            async for chunk in stream:
                await out.write(chunk)


class Words(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        text = await req.take_input().collect_all_bytes()
        out = req.output()
        for i, word in enumerate(text.decode().split()):
            await out.emit_list_item(word, {"index": i})


class Fail(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = (await wet.request.take_input().collect_all_bytes()).decode()
        raise OpError("PEER_BAD_INPUT", f"bad input: {text}", "input", arg_urn="media:")


class Boom(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        raise ValueError("kaboom")


class Sink(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.take_input().collect_all_bytes()


class Empty(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        return None


class Multi(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        text = (await req.take_input().collect_all_bytes()).decode()
        await req.output().emit_cbor(text.upper())
        await req.output_for(SIDE).emit_cbor(json.dumps({"length": len(text)}))


class Progress(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        await req.take_input().collect_all_bytes()
        out = req.output()
        await out.progress(0.25, "quarter")
        await out.log("info", "halfway", "internal")
        await out.progress(0.5, "half")
        await out.emit_cbor("done")
        out.finish(0.9, "nearly")


class Slow(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.progress(0.0, "started")
        await anyio.sleep_forever()


class Twice(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        wet.request.take_input()
        wet.request.take_input()


class Undeclared(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        wet.request.output_for("media:nope")


class Require(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.take_input().require_stream_str("media:wanted;enc=utf-8")


class Concat(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        pkg = req.take_input()
        first = await pkg.require_stream("media:first")
        second = await pkg.require_stream(SECOND)
        await req.output().write(first + second)


class Unbounded(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        out = req.output()
        await out.start_unbounded(is_sequence=True)
        async for stream in req.take_input():
            async for value in stream.values():
                await out.emit_list_item(value)


class SyncUpper(Op):
    def perform(self, dry: DryContext, wet: WetContext) -> None:  # type: ignore[override]
        req = wet.request
        data = b"".join(chunk for stream in req.take_input() for chunk in stream)
        req.output().write(data.upper())
        req.output().progress(0.5, "sync")


class PeerEcho(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        data = await req.take_input().collect_all_bytes()
        resp = await req.peer().call_with_bytes(ECHO, [("media:", data)], progress_range=(0.0, 0.5))
        await req.output().write(await resp.collect_bytes())


class Net(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        wet.request.network.allow(Reach.THIRD_PARTY)
        await wet.request.output().emit_cbor("allowed")


class Value(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().emit_cbor({"a": 1, "b": [1, 2]})


class FailAfter(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        await out.write(b"x" * 5000)
        await out.write(b"tail")  # coalesced, lost by the ERR
        raise BadPage("page 3 is empty")


class Meta(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().start(meta={"origin": "test"})
        await wet.request.output().write(b"m")


def _simple(urn: str, alias: str, **kw: object) -> CapDef:
    return CapDef.simple(urn, alias.title(), aliases=alias, **kw)  # type: ignore[arg-type]


def build_runtime(capacities: dict[str, int] | None = None) -> CartridgeRuntime:
    caps = [
        _simple(ECHO, "echo"),
        _simple(WORDS, "words", output_is_sequence=True),
        _simple(FAIL, "fail"),
        _simple(BOOM, "boom"),
        _simple(SINK, "sink"),
        _simple(EMPTY, "empty"),
        _simple(
            MULTI,
            "multi",
            extra_outputs=[
                OutputDef(media_urn=SIDE, name="side", output_description="side"),
                OutputDef(
                    media_urn=OPTIONAL, name="maybe", output_description="maybe", optional=True
                ),
            ],
        ),
        _simple(PROGRESS, "progress"),
        _simple(SLOW, "slow"),
        _simple(TWICE, "twice"),
        _simple(UNDECLARED, "undeclared"),
        _simple(REQUIRE, "require"),
        _simple(
            CONCAT,
            "concat",
            extra_args=[
                ArgDef(media_urn=SECOND, name="second", sources=[CliFlagSource(flag="--second")])
            ],
        ),
        _simple(UNBOUNDED, "unbounded"),
        _simple(SYNC, "sync-upper"),
        _simple(PEER, "peer-echo"),
        _simple(NET, "net"),
        _simple(VALUE, "value"),
        _simple(FAILAFTER, "fail-after"),
        _simple(META, "meta"),
    ]
    manifest = Manifest.build(
        name="runtime-tests",
        version="1.0.0",
        description="runtime tests",
        caps=caps,
        capacities=capacities,
    )
    rt = CartridgeRuntime(manifest)
    for urn, op in [
        (ECHO, Echo),
        (WORDS, Words),
        (FAIL, Fail),
        (BOOM, Boom),
        (SINK, Sink),
        (EMPTY, Empty),
        (MULTI, Multi),
        (PROGRESS, Progress),
        (SLOW, Slow),
        (TWICE, Twice),
        (UNDECLARED, Undeclared),
        (REQUIRE, Require),
        (CONCAT, Concat),
        (UNBOUNDED, Unbounded),
        (SYNC, SyncUpper),
        (PEER, PeerEcho),
        (NET, Net),
        (VALUE, Value),
        (FAILAFTER, FailAfter),
        (META, Meta),
    ]:
        rt.register_op(urn, op)
    return rt


def words_request(req: Request) -> None:  # pragma: no cover - type-check helper
    del req
