#!/usr/bin/env python3
"""runskit: a test cartridge for runs that remember (step cache, records, reports).

Every call appends ``op`` to the file ``$RUNSKIT_CALL_LOG`` names, so a test counts the calls
that reached the cartridge. ``stage-1`` .. ``stage-3`` stream their input back; ``final``
does too, but fails while the file ``$RUNSKIT_FAIL`` exists; ``random`` is marked
non-deterministic; ``make`` writes as many bytes as its input says; ``parts`` splits text
into items with meta and fires its optional ``note`` output only for text with a ``!``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Final

import anyio

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, OpError, Request

DATA: Final = "media:data;runs"
TEXT: Final = "media:enc=utf-8"
PART: Final = "media:enc=utf-8;part"
NOTE: Final = "media:enc=utf-8;note"


def cap(op: str, src: str = DATA, dst: str = DATA) -> str:
    return f'cap:in="{src}";op={op};out="{dst}"'


STAGES: Final = tuple(cap(f"stage-{n}") for n in (1, 2, 3))
FINAL: Final = cap("final")
RANDOM: Final = cap("random")
MAKE: Final = cap("make", TEXT, DATA)
PARTS: Final = cap("parts", TEXT, PART)
SHOUT: Final = cap("shout", PART, PART)
PIECE: Final = 1 << 20


def _simple(urn: str, alias: str, src: str, dst: str, **kw: object) -> CapDef:
    return CapDef(
        urn=urn,
        title=alias,
        aliases=(alias,),
        cap_description=f"runskit {alias}",
        args=[ArgDef.stdin(src, name="input", description="in")],
        outputs=[OutputDef(media_urn=dst, name="output", output_description="out")],
        **kw,  # type: ignore[arg-type]
    )


CAPS = [
    *(_simple(urn, f"stage{n}", DATA, DATA) for n, urn in enumerate(STAGES, 1)),
    _simple(FINAL, "final", DATA, DATA),
    _simple(RANDOM, "random", DATA, DATA, metadata={"deterministic": "false"}),
    _simple(MAKE, "make", TEXT, DATA),
    _simple(SHOUT, "shout", PART, PART),
    CapDef(
        urn=PARTS,
        title="parts",
        aliases=("parts",),
        cap_description="runskit parts",
        args=[ArgDef.stdin(TEXT, name="text", description="text")],
        outputs=[
            OutputDef(media_urn=PART, name="parts", output_description="words", is_sequence=True),
            OutputDef(media_urn=NOTE, name="note", output_description="a note", optional=True),
        ],
    ),
]

runtime = CartridgeRuntime(
    Manifest.build(name="runskit", version="1.0.0", description="runs test kit", caps=CAPS)
)


def _log(op: str) -> None:
    path = os.environ.get("RUNSKIT_CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(op + "\n")


async def _echo(req: Request) -> None:
    out = req.output()
    async for stream in req.take_input():
        async for chunk in stream.chunks():
            await out.write(chunk)
    await out.close()


def _stage(name: str):  # type: ignore[no-untyped-def]
    async def handler(req: Request) -> None:
        _log(name)
        await _echo(req)

    return handler


for _n, _urn in enumerate(STAGES, 1):
    runtime.op(_urn)(_stage(f"stage-{_n}"))


@runtime.op(FINAL)
async def final(req: Request) -> None:
    _log("final")
    fail = os.environ.get("RUNSKIT_FAIL")
    if fail and await anyio.Path(fail).exists():
        print("final: failing on purpose", file=sys.stderr, flush=True)
        raise OpError("FAILED_ON_PURPOSE", "the fail file exists", "input")
    await _echo(req)


@runtime.op(RANDOM)
async def random_(req: Request) -> None:
    _log("random")
    data = await req.take_input().collect_all_bytes()
    await req.output().write(data + os.urandom(8).hex().encode())


@runtime.op(MAKE)
async def make(req: Request) -> None:
    _log("make")
    size = int(await req.take_input().require_stream_str(TEXT))
    block = hashlib.sha256(b"runskit").digest() * (PIECE // 32)
    out = req.output()
    sent = 0
    while sent < size:
        n = min(PIECE, size - sent)
        await out.write(block[:n])
        sent += n
    await out.close()


@runtime.op(PARTS)
async def parts(req: Request) -> None:
    _log("parts")
    text = await req.take_input().require_stream_str(TEXT)
    out = req.output()
    await out.start(is_sequence=True)
    for index, word in enumerate(text.split()):
        await out.emit_list_item(word.encode(), {"index": index})
    if "!" in text:
        await req.output_for(NOTE).emit_text("loud")


@runtime.op(SHOUT)
async def shout(req: Request) -> None:
    _log("shout")
    word = await req.take_input().require_stream(PART)
    await req.output().write(word.upper())


if __name__ == "__main__":
    runtime.run()
