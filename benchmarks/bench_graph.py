#!/usr/bin/env python3
"""Graphs measured side by side with what they are made of (not a test).

Two comparisons, each in one process and one run, so the ratios hold however busy the host:

1. **growth**: from inside one call, N growth batches of one ``add_value_node`` each (the
   grow-graph cap, answered by the engine) against N plain peer calls of a tiny cap served by
   the same cartridge. Target: a batch costs at most 2x a peer call.
2. **nodes**: a chain of NODES cap nodes of that tiny cap run as a graph, against a machine of
   NODES steps of it; the time per node against the time per machine step. Target: at most
   1.5x. The two runs alternate ``--rounds`` times and the medians are compared.

Usage: ``.venv/bin/python benchmarks/bench_graph.py [--ops 500] [--nodes 1000] [--rounds 3]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _graph_bench_cartridge import LOOP, TEXT, TINY  # noqa: E402

from cartridge_runtime.engine import Engine  # noqa: E402

CARTRIDGE = ROOT / "benchmarks" / "_graph_bench_cartridge.py"
LOOP_IN = "media:bench-loop;json"


async def _loop(engine: Engine, n: int, mode: str) -> float:
    async with engine.graph() as g:
        spec = g.add_value_node(json.dumps({"n": n, "mode": mode}), media=LOOP_IN)
        node = g.instantiate_with_deps(LOOP, {LOOP_IN: spec})
        result = await g.run(node)
        result.raise_for_error()
        return float(result[node].text)


async def bench_growth(ops: int, rounds: int) -> dict[str, Any]:
    peer: list[float] = []
    grow: list[float] = []
    async with Engine() as engine:
        engine.add_cartridge(str(CARTRIDGE))
        await _loop(engine, 20, "peer")  # warm up both paths
        await _loop(engine, 20, "grow")
        for _ in range(rounds):
            peer.append(await _loop(engine, ops, "peer") / ops)
            grow.append(await _loop(engine, ops, "grow") / ops)
    p, g = statistics.median(peer), statistics.median(grow)
    return {
        "ops": ops,
        "peer_call_us": p * 1e6,
        "growth_batch_us": g * 1e6,
        "ratio": g / p,
        "target": 2.0,
    }


def _machine_text(n: int) -> str:
    lines = [f"s{i} {TINY}" for i in range(n)]
    lines += [f"n{i} -> s{i} -> n{i + 1}" for i in range(n)]
    return "\n".join(lines)


async def bench_nodes(nodes: int, rounds: int) -> dict[str, Any]:
    graph_s: list[float] = []
    machine_s: list[float] = []
    async with Engine() as engine:
        engine.add_cartridge(str(CARTRIDGE))
        machine = await engine.machine(_machine_text(nodes))
        await engine.call_bytes(TINY, [(TEXT, b"warm")])
        for _ in range(rounds):
            t0 = time.perf_counter()
            result = await engine.run_machine(machine, {"n0": b"x"})
            machine_s.append(time.perf_counter() - t0)
            assert result[f"n{nodes}"].data == b"x"
            async with engine.graph() as g:
                last = g.add_value_node(b"x", media=TEXT)
                for _ in range(nodes):
                    last = g.instantiate_with_deps(TINY, {TEXT: last})
                t0 = time.perf_counter()
                done = await g.run(last)
                graph_s.append(time.perf_counter() - t0)
                assert done.ok and done[last].data == b"x"
    m, gr = statistics.median(machine_s) / nodes, statistics.median(graph_s) / nodes
    return {
        "nodes": nodes,
        "machine_step_us": m * 1e6,
        "graph_node_us": gr * 1e6,
        "ratio": gr / m,
        "target": 1.5,
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "growth": await bench_growth(args.ops, args.rounds),
        "nodes": await bench_nodes(args.nodes, args.rounds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=500, help="growth batches / peer calls")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of the chain")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    out = anyio.run(_main, args)
    g, n = out["growth"], out["nodes"]
    print(f"{'comparison':<34}{'ours':>14}{'baseline':>14}{'ratio':>8}{'target':>8}")
    print(
        f"{'growth batch vs peer call':<34}{g['growth_batch_us']:>11.1f} us"
        f"{g['peer_call_us']:>11.1f} us{g['ratio']:>8.2f}{'<= 2.0':>8}"
    )
    label = f"graph node vs machine step ({n['nodes']})"
    print(
        f"{label:<34}{n['graph_node_us']:>11.1f} us"
        f"{n['machine_step_us']:>11.1f} us{n['ratio']:>8.2f}{'<= 1.5':>8}"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
