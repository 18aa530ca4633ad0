#!/usr/bin/env python3
"""Planning measured side by side with capdag-py's planner on the same caps (not a test).

CAPS generated caps (seeded) over a vocabulary of media types with refinements, sequence
inputs and outputs, extra outputs and generic caps; QUERIES (source, target) pairs drawn from
what the source can reach; each query asks for the paths to depth DEPTH with limit LIMIT.
Both planners answer every query in this one process, interleaved, so the ratios hold however
busy the host is. The answers are compared first (same caps, same order).

Rows (median time per query, ours against the reference, and the ratio):

1. **search, graph reused**: the graph built once, then ``find_paths`` against
   ``LiveCapFab.find_paths_to_exact_target``.
2. **search, graph per query**: the graph built for each query (``CapGraph.from_caps`` against
   ``LiveCapFab.sync_from_caps``) and the search.
3. **notation**: every found plan written as its canonical machine text (``Plan.to_notation``
   against ``Strand.knit`` and the reference serializer).
4. **reachable**: ``reachable_targets`` against ``get_reachable_targets``.

Usage: ``.venv/bin/python benchmarks/bench_planner.py [--caps 200] [--depth 6] [--limit 20]
[--queries 8] [--rounds 3] [--seed 7] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartridge_runtime.manifest import CapDef  # noqa: E402
from cartridge_runtime.planner import (  # noqa: E402
    CapGraph,
    find_paths,
    reachable_targets,
)

TARGET_RATIO = 5.0


def _vocabulary(rng: random.Random, kinds: int) -> list[str]:
    """``media:kN`` types, some refined (``;v=2``, ``;x``), a few generic ones."""
    types = []
    for index in range(kinds):
        base = f"media:k{index}"
        types.append(base)
        if rng.random() < 0.5:
            types.append(f"{base};v=2")
        if rng.random() < 0.3:
            types.append(f"{base};x")
    return types


def _arg(name: str, media: str, sequence: bool) -> dict[str, Any]:
    return {"media_urn": media, "name": name, "required": True, "sources": [{"stdin": media}],
            "is_sequence": sequence, "streaming": False}  # fmt: skip


def _out(name: str, media: str, sequence: bool) -> dict[str, Any]:
    return {"media_urn": media, "name": name, "output_description": name, "optional": False,
            "is_sequence": sequence, "streaming": False}  # fmt: skip


def generate_caps(count: int, seed: int) -> list[dict[str, Any]]:
    """The identity cap and ``count`` generated caps, as manifest cap JSON."""
    rng = random.Random(seed)
    types = _vocabulary(rng, max(8, count // 5))
    caps: list[dict[str, Any]] = [
        {"urn": "cap:effect=none", "title": "Identity", "aliases": ["identity"],
         "args": [_arg("input", "media:", False)], "outputs": [_out("output", "media:", False)]}
    ]  # fmt: skip
    for index in range(count):
        source = rng.choice(types)
        target = rng.choice(types)
        if rng.random() < 0.05:
            source = source.split(";")[0]  # a generic cap on the base type
        urn = f'cap:in="{source}";op=op{index};out="{target}"'
        outputs = [_out("out", target, rng.random() < 0.25)]
        if rng.random() < 0.1:
            outputs.append(_out("more", rng.choice(types), rng.random() < 0.5))
        caps.append(
            {"urn": urn, "title": f"op{index}", "aliases": [f"op{index}"],
             "args": [_arg("in", source, rng.random() < 0.1)], "outputs": outputs}
        )  # fmt: skip
    return caps


def _median_seconds(call: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Reference:
    """capdag-py's planner over the same cap JSON."""

    def __init__(self, caps_json: list[dict[str, Any]]) -> None:
        from capdag.cap.definition import Cap
        from capdag.machine import serializer
        from capdag.planner.live_cap_fab import LiveCapFab
        from capdag.urn.media_urn import MediaUrn

        self.caps = [Cap.from_dict(data) for data in caps_json]
        self.fab_class = LiveCapFab
        self.media = MediaUrn.from_string
        self.serializer = serializer
        self.fab = LiveCapFab()
        self.fab.sync_from_caps(self.caps)
        self.registry = _Registry(self.caps)

    def fresh(self) -> Any:
        fab = self.fab_class()
        fab.sync_from_caps(self.caps)
        return fab

    def paths(self, fab: Any, source: str, target: str, depth: int, limit: int) -> list[Any]:
        found: list[Any] = fab.find_paths_to_exact_target(
            self.media(source), self.media(target), False, depth, limit
        )
        return found

    def notation(self, strand: Any) -> str:
        machine = strand.knit(self.registry)
        text: str = self.serializer.to_machine_notation_formatted(
            machine, self.serializer.FORMAT_LINE_BASED
        )
        return text


class _Registry:
    def __init__(self, caps: list[Any]) -> None:
        self._caps = {cap.urn.to_string(): cap for cap in caps}

    def get_cached_cap(self, urn: str) -> Any:
        return self._caps.get(urn)

    def resolve_alias_cached(self, name: str) -> None:
        return None

    def get_cached_media_def(self, urn: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(validation=None, schema=None, title=urn)


def pick_queries(
    graph: CapGraph, caps_json: list[dict[str, Any]], count: int, depth: int, seed: int
) -> list[tuple[str, str]]:
    """(source, target) pairs whose target is reachable from the source within ``depth``,
    preferring far targets (the searches that cost the most)."""
    rng = random.Random(seed + 1)
    sources = sorted({cap["args"][0]["media_urn"] for cap in caps_json[1:]})
    rng.shuffle(sources)
    queries: list[tuple[str, str]] = []
    for source in sources:
        targets = reachable_targets(graph, source, max_depth=depth)
        if not targets:
            continue
        far = [t for t in targets if t.min_path_length >= 2] or targets
        queries.append((source, rng.choice(far).media_urn.text))
        if len(queries) == count:
            break
    return queries


Call = Callable[[], object]


def _calls(
    reference: Reference, caps: list[CapDef], source: str, target: str, depth: int, limit: int
) -> dict[str, tuple[Call, Call]]:
    """For each row, the call of ours and the reference's for one query."""
    warm = CapGraph.from_caps(caps)
    plans = find_paths(warm, source, target, max_depth=depth, limit=limit)  # warms ``warm``
    strands = reference.paths(reference.fab, source, target, depth, limit)

    def ours_reused() -> object:
        return find_paths(warm, source, target, max_depth=depth, limit=limit)

    def theirs_reused() -> object:
        return reference.paths(reference.fab, source, target, depth, limit)

    def ours_fresh() -> object:
        return find_paths(CapGraph.from_caps(caps), source, target, max_depth=depth, limit=limit)

    def theirs_fresh() -> object:
        return reference.paths(reference.fresh(), source, target, depth, limit)

    def ours_notation() -> object:
        # a copy of each plan, so no machine knitted before is reused
        return [attrs.evolve(plan).to_notation() for plan in plans]

    def theirs_notation() -> object:
        return [reference.notation(strand) for strand in strands]

    def ours_reachable() -> object:
        return reachable_targets(CapGraph.from_caps(caps), source, max_depth=depth)

    def theirs_reachable() -> object:
        fab = reference.fresh()
        return fab.get_reachable_targets(reference.media(source), False, depth)

    return {
        "reused": (ours_reused, theirs_reused),
        "fresh": (ours_fresh, theirs_fresh),
        "notation": (ours_notation, theirs_notation),
        "reachable": (ours_reachable, theirs_reachable),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", type=int, default=200)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    caps_json = generate_caps(args.caps, args.seed)
    caps = [CapDef.from_json(data) for data in caps_json]
    graph = CapGraph.from_caps(caps)
    reference = Reference(caps_json)
    queries = pick_queries(graph, caps_json, args.queries, args.depth, args.seed)
    depth, limit, rounds = args.depth, args.limit, args.rounds

    # The answers first: both planners must give the same plans in the same order.
    disagreements = 0
    total_plans = 0
    for source, target in queries:
        ours = [p.to_notation() for p in find_paths(graph, source, target, max_depth=depth,
                                                     limit=limit)]  # fmt: skip
        theirs = [
            reference.notation(s)
            for s in reference.paths(reference.fab, source, target, depth, limit)
        ]
        total_plans += len(ours)
        disagreements += ours != theirs

    rows: dict[str, tuple[float, float]] = {}
    totals = {"reused": [0.0, 0.0], "fresh": [0.0, 0.0], "notation": [0.0, 0.0],
              "reachable": [0.0, 0.0]}  # fmt: skip
    for source, target in queries:
        calls = _calls(reference, caps, source, target, depth, limit)
        for name, (ours_call, theirs_call) in calls.items():
            totals[name][0] += _median_seconds(ours_call, rounds)
            totals[name][1] += _median_seconds(theirs_call, rounds)
    for name, (ours_total, theirs_total) in totals.items():
        rows[name] = (ours_total / len(queries), theirs_total / len(queries))

    print(
        f"planner: {args.caps} caps, depth {depth}, limit {limit}, {len(queries)} queries, "
        f"{total_plans} plans, {disagreements} disagreements with capdag"
    )
    print(f"{'row':<28}{'ours ms':>10}{'capdag ms':>12}{'ratio':>9}")
    labels = {
        "reused": "search, graph reused",
        "fresh": "search, graph per query",
        "notation": "notation of every plan",
        "reachable": "reachable, graph per query",
    }
    result: dict[str, Any] = {"caps": args.caps, "depth": depth, "limit": limit,
                              "queries": len(queries), "disagreements": disagreements}  # fmt: skip
    for name, (ours_time, theirs_time) in rows.items():
        ratio = theirs_time / ours_time if ours_time else float("inf")
        print(f"{labels[name]:<28}{ours_time * 1e3:>10.3f}{theirs_time * 1e3:>12.3f}{ratio:>8.1f}x")
        result[name] = {"ours_ms": ours_time * 1e3, "capdag_ms": theirs_time * 1e3,
                        "ratio": ratio}  # fmt: skip
    fresh_ratio = result["fresh"]["ratio"]
    verdict = "meets" if fresh_ratio >= TARGET_RATIO else "misses"
    print(
        f"search with a fresh graph {verdict} the {TARGET_RATIO:.0f}x target ({fresh_ratio:.1f}x)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
