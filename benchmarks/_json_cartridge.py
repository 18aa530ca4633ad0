#!/usr/bin/env python3
"""A cartridge for ``benchmarks/bench_output_check.py``: ``rows`` answers a JSON record of
about 1 MiB (``{"rows": [...]}``, records of an id, a name, a price and tags), ``text`` one
whose weight is a text (``{"name": ..., "lines": [...]}``, 64 lines of 16 KiB); both are built
with ``json.dumps`` for each call as a real handler would."""

from __future__ import annotations

import json
from typing import Final

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

TEXT: Final = "media:enc=utf-8"
ROWS_MEDIA: Final = "media:fmt=json;record;rows"
ROWS: Final = f'cap:in="{TEXT}";op=rows;out="{ROWS_MEDIA}"'
DOC_MEDIA: Final = "media:fmt=json;record;doc"
DOC: Final = f'cap:in="{TEXT}";op=text;out="{DOC_MEDIA}"'

MANIFEST: Final = Manifest.build(
    name="jsonrows",
    version="1.0.0",
    description="Answers about 1 MiB of JSON records",
    caps=[CapDef.simple(ROWS, "Rows", aliases="rows"), CapDef.simple(DOC, "Text", aliases="text")],
)


def document(count: int) -> bytes:
    rows = [
        {"id": i, "name": f"item-{i:06d}", "price": i * 0.25, "tags": ["a", "b", f"t{i % 7}"]}
        for i in range(count)
    ]
    return json.dumps({"rows": rows}).encode()


def text_document(size: int) -> bytes:
    line = "lorem ipsum dolor sit amet " * (size // 64 // 27 + 1)
    lines = [f"{i:04d} {line}"[: size // 64] for i in range(64)]
    return json.dumps({"name": "doc", "lines": lines}).encode()


class Text(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        size = int((await wet.request.take_input().collect_all_bytes()).decode())
        await wet.request.output().write(text_document(size))


class Rows(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        count = int((await wet.request.take_input().collect_all_bytes()).decode())
        await wet.request.output().write(document(count))


if __name__ == "__main__":
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(ROWS, Rows)
    runtime.register_op(DOC, Text)
    runtime.run()
