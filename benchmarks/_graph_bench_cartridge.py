"""The cartridge ``bench_graph.py`` drives: a tiny cap, and a handler that times N peer calls
of it or N growth batches of one op each, from inside one call (not a test)."""

from __future__ import annotations

import json
import time

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, Request

TEXT = "media:enc=utf-8"
TINY = 'cap:in="media:enc=utf-8";op=tiny;out="media:enc=utf-8"'
LOOP = 'cap:in="media:bench-loop;json";op=loop;out="media:enc=utf-8"'

runtime = CartridgeRuntime(
    Manifest.build(
        name="graph-bench",
        version="1.0.0",
        description="graph benchmark",
        caps=[
            CapDef.simple(TINY, "Tiny", aliases="tiny"),
            CapDef.simple(LOOP, "Loop", aliases="loop"),
        ],
    )
)


@runtime.op(TINY)
async def tiny(req: Request) -> None:
    await req.output().write(await req.take_input().require_stream(TEXT))


@runtime.op(LOOP)
async def loop(req: Request) -> None:
    spec = json.loads(await req.take_input().require_stream("media:bench-loop;json"))
    n, mode = int(spec["n"]), spec["mode"]
    peer = req.peer()
    started = time.perf_counter()
    for i in range(n):
        if mode == "peer":
            response = await peer.call_with_bytes(TINY, [(TEXT, b"x%d" % i)])
            await response.collect_bytes()
        else:
            await req.graph.grow([{"op": "add_value_node", "value": f"x{i}", "media": TEXT}])
    await req.output().emit_text(f"{time.perf_counter() - started:.9f}")


if __name__ == "__main__":
    runtime.run()
