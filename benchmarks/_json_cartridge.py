#!/usr/bin/env python3
"""A cartridge for ``benchmarks/bench_output_check.py``: ``rows`` answers a JSON record of
about 1 MiB (``{"rows": [...]}``, records of an id, a name, a price and tags), built with
``json.dumps`` for each call as a real handler would."""

from __future__ import annotations

import json
from typing import Final

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

TEXT: Final = "media:enc=utf-8"
ROWS_MEDIA: Final = "media:fmt=json;record;rows"
ROWS: Final = f'cap:in="{TEXT}";op=rows;out="{ROWS_MEDIA}"'

MANIFEST: Final = Manifest.build(
    name="jsonrows",
    version="1.0.0",
    description="Answers about 1 MiB of JSON records",
    caps=[CapDef.simple(ROWS, "Rows", aliases="rows")],
)


def document(count: int) -> bytes:
    rows = [
        {"id": i, "name": f"item-{i:06d}", "price": i * 0.25, "tags": ["a", "b", f"t{i % 7}"]}
        for i in range(count)
    ]
    return json.dumps({"rows": rows}).encode()


class Rows(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        count = int((await wet.request.take_input().collect_all_bytes()).decode())
        await wet.request.output().write(document(count))


if __name__ == "__main__":
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(ROWS, Rows)
    runtime.run()
