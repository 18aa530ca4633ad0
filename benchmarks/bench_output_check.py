#!/usr/bin/env python3
"""What holding an output to its media definition costs, side by side in one run (not a test).

One engine, one cartridge (``benchmarks/_json_cartridge.py``, a subprocess) answering a JSON
record of about 1 MiB whose media definition carries a JSON Schema, in two shapes: ``records``
(13,100 records, each one's four fields typed, required and bounded: the check walks every
one) and ``text`` (64 lines of 16 KiB under a name: the weight is text). Each round makes one
call with the check (``checked``) and one with ``check_outputs=False`` (``plain``), in
alternating order; the report gives the medians per shape and their ratio (target: at most
1.10).

Usage: ``.venv/bin/python benchmarks/bench_output_check.py [--rounds N] [--rows N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CARTRIDGE = Path(__file__).resolve().parent / "_json_cartridge.py"
TEXT = "media:enc=utf-8"
ROWS_MEDIA = "media:fmt=json;record;rows"
ROWS = f'cap:in="{TEXT}";op=rows;out="{ROWS_MEDIA}"'
DOC_MEDIA = "media:fmt=json;record;doc"
DOC = f'cap:in="{TEXT}";op=text;out="{DOC_MEDIA}"'
DOC_SCHEMA = {
    "type": "object",
    "required": ["name", "lines"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "lines": {"type": "array", "items": {"type": "string", "maxLength": 65536}},
    },
}

SCHEMA = {
    "type": "object",
    "required": ["rows"],
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "name", "price", "tags"],
                "properties": {
                    "id": {"type": "integer", "minimum": 0},
                    "name": {"type": "string", "maxLength": 64},
                    "price": {"type": "number", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}


async def _shape(engine: Any, cap: str, arg: str, rounds: int) -> tuple[float, float, int]:
    times: dict[bool, list[float]] = {True: [], False: []}
    size = 0
    for check in (True, False):  # warm both paths (start-up, schema compiled once)
        await engine.call(cap, [(TEXT, arg)], check_outputs=check)
    for i in range(rounds):
        for check in (True, False) if i % 2 else (False, True):
            began = time.perf_counter()
            result = await engine.call(cap, [(TEXT, arg)], check_outputs=check)
            times[check].append(time.perf_counter() - began)
            size = len(result.data)
    return statistics.median(times[False]), statistics.median(times[True]), size


async def main(rounds: int, rows: int) -> None:
    from cartridge_runtime.engine import Engine

    media = [
        {"urn": ROWS_MEDIA, "media_type": "application/json", "title": "Rows", "schema": SCHEMA},
        {"urn": DOC_MEDIA, "media_type": "application/json", "title": "Doc", "schema": DOC_SCHEMA},
    ]
    async with Engine(media=media, heartbeat_interval=None) as engine:
        engine.add_cartridge(CARTRIDGE)
        shapes = {
            "records": await _shape(engine, ROWS, str(rows), rounds),
            "text": await _shape(engine, DOC, str(1 << 20), rounds),
        }
    print(f"{rounds} rounds, medians; target: checked <= 1.10 x plain")
    print(f"{'shape':<10}{'MiB':>6}{'plain ms':>10}{'checked ms':>12}{'ratio':>8}")
    for name, (plain, checked, size) in shapes.items():
        print(
            f"{name:<10}{size / (1 << 20):>6.2f}{plain * 1000:>10.1f}"
            f"{checked * 1000:>12.1f}{checked / plain:>8.3f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=13_100)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.rows)
