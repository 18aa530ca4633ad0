#!/usr/bin/env python3
"""What holding an output to its media definition costs, side by side in one run (not a test).

One engine, one cartridge (``benchmarks/_json_cartridge.py``, a subprocess) answering a JSON
record of about 1 MiB (13,100 records) whose media definition carries a JSON Schema (each
record's four fields typed, required, bounded). Each round makes one call with the check
(``checked``) and one with ``check_outputs=False`` (``plain``), in alternating order; the
report gives the medians and their ratio (target: at most 1.10).

Usage: ``.venv/bin/python benchmarks/bench_output_check.py [--rounds N] [--rows N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CARTRIDGE = Path(__file__).resolve().parent / "_json_cartridge.py"
TEXT = "media:enc=utf-8"
ROWS_MEDIA = "media:fmt=json;record;rows"
ROWS = f'cap:in="{TEXT}";op=rows;out="{ROWS_MEDIA}"'

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


async def main(rounds: int, rows: int) -> None:
    from cartridge_runtime.engine import Engine

    media = [{"urn": ROWS_MEDIA, "media_type": "application/json", "title": "Rows", "schema": SCHEMA}]
    times: dict[bool, list[float]] = {True: [], False: []}
    size = 0
    async with Engine(media=media, heartbeat_interval=None) as engine:
        engine.add_cartridge(CARTRIDGE)
        for check in (True, False):  # warm both paths (start-up, schema compiled once)
            await engine.call(ROWS, [(TEXT, str(rows))], check_outputs=check)
        for i in range(rounds):
            for check in (True, False) if i % 2 else (False, True):
                began = time.perf_counter()
                result = await engine.call(ROWS, [(TEXT, str(rows))], check_outputs=check)
                times[check].append(time.perf_counter() - began)
                size = len(result.data)
    checked, plain = statistics.median(times[True]), statistics.median(times[False])
    print(f"output {size / (1 << 20):.2f} MiB, {rows} records, {rounds} rounds (medians)")
    print(f"plain    {plain * 1000:8.1f} ms")
    print(f"checked  {checked * 1000:8.1f} ms")
    print(f"ratio    {checked / plain:8.3f}  (target <= 1.10)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=13_100)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.rows)
