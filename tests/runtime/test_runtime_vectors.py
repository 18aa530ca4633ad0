"""Our runtime's responses compared frame by frame with the reference's recorded ones.

The host side of each recorded scenario is replayed byte for byte (same request ids) into our
runtime serving handlers that do what the recording cartridge did; every response flow frame
must equal the recorded one except for the random part of the response stream ids.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cartridge_runtime.manifest import Manifest
from cartridge_runtime.protocol import Frame, FrameType, decode_frame
from cartridge_runtime.runtime import CartridgeRuntime, Request
from cartridge_runtime.testing import CartridgeHarness

VECTORS = Path(__file__).resolve().parents[2] / "protocol_spec" / "vectors" / "frames"


def _load(prefix: str) -> list[dict]:
    path = next(VECTORS.glob(f"{prefix}-*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _runtime(lines: list[dict]) -> CartridgeRuntime:
    hello = next(d for d in lines if d["dir"] == "cartridge->host" and d["type"] == "HELLO")
    manifest = Manifest.from_dict(hello["decoded"]["5"]["manifest"])
    rt = CartridgeRuntime(manifest)

    @rt.op("cap:peer-echo")
    async def echo(req: Request) -> None:
        await req.output().write(await req.take_input().collect_all_bytes())

    @rt.op('cap:out="media:peer-word;textable";peer-list')
    async def words(req: Request) -> None:
        for w in (await req.take_input().collect_all_bytes()).decode().split():
            await req.output().emit_list_item(w)

    @rt.op("cap:peer-progress")
    async def progress(req: Request) -> None:
        data = await req.take_input().collect_all_bytes()
        out = req.output()
        await out.progress(0.25, "read input")
        await out.log("info", f"input is {len(data)} bytes")
        await out.log("warn", "input looks short", "input", arg_urn="media:")
        await out.progress(0.75, "writing output")
        await out.write(data.upper())
        out.finish(1.0, "progress demo complete")

    @rt.op('cap:out="media:peer-main;textable";peer-multi')
    async def multi(req: Request) -> None:
        text = (await req.take_input().collect_all_bytes()).decode()
        await req.output().emit_cbor(f"main:{text}")
        await req.output_for("media:peer-side;textable").emit_cbor(f"side:{text[::-1]}")

    @rt.op("cap:out=media:void;peer-sink")
    async def sink(req: Request) -> None:
        await req.take_input().collect_all_bytes()

    @rt.op("cap:peer-empty")
    async def empty(req: Request) -> None:
        await req.take_input().collect_all_bytes()

    @rt.op("cap:peer-slow")  # the manifest gives it a capacity, so it needs a handler
    async def slow(req: Request) -> None:
        await req.take_input().collect_all_bytes()

    return rt


def _norm(frame: Frame) -> Frame:
    sid = frame.stream_id
    if sid is not None:
        sid = re.sub(r"^resp-[0-9a-f]{8}-", "resp-XXXXXXXX-", sid)
    return frame.replace(stream_id=sid)


@pytest.mark.asyncio
@pytest.mark.parametrize("prefix", ["02", "03", "07", "08", "12"])
async def test_responses_match_reference_vectors(prefix: str) -> None:
    lines = _load(prefix)
    scenario = [d for d in lines if d["phase"] == "scenario"]
    host = [
        decode_frame(bytes.fromhex(d["hex"])) for d in scenario if d["dir"] == "host->cartridge"
    ]
    expected = [
        decode_frame(bytes.fromhex(d["hex"]))
        for d in scenario
        if d["dir"] == "cartridge->host" and d["type"] not in ("CREDIT", "HEARTBEAT")
    ]
    rids = list(dict.fromkeys(f.id for f in host if f.frame_type is FrameType.REQ))
    async with CartridgeHarness(_runtime(lines), policy="offline") as h:
        for f in host:
            await h.send_raw(
                bytes.fromhex(
                    next(d["hex"] for d in scenario if decode_frame(bytes.fromhex(d["hex"])) == f)
                )
            )
        for rid in rids:
            await h.wait_for(lambda f, rid=rid: f.id == rid and f.frame_type.is_terminal)
        got = [f for f in h.received if f.id in rids and f.frame_type.is_flow]
    for rid in rids:
        ours = [_norm(f) for f in got if f.id == rid]
        theirs = [_norm(f) for f in expected if f.id == rid]
        assert ours == theirs
