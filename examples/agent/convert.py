"""A tool cartridge: degrees Celsius to Fahrenheit."""

from __future__ import annotations

import json

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, Request

QUERY = "media:convert-query;json"
CONVERT = 'cap:in="media:convert-query;json";op=convert;out="media:tool-output;enc=utf-8"'

manifest = Manifest.build(
    name="agent-convert",
    version="1.0.0",
    description="Celsius to Fahrenheit",
    caps=[CapDef.simple(CONVERT, "Convert", aliases="convert", description="°C to °F")],
)
runtime = CartridgeRuntime(manifest)


@runtime.op(CONVERT)
async def convert(req: Request) -> None:
    query = json.loads(await req.take_input().require_stream_str(QUERY))
    fahrenheit = query["celsius"] * 9 / 5 + 32
    await req.output().emit_text(f"{fahrenheit:g} °F")


if __name__ == "__main__":
    runtime.run()
