#!/usr/bin/env python3
"""Parse and resolve one generated machine with ours and with the reference, in one run.

    .venv/bin/python benchmarks/bench_machine_parse.py [--steps 200] [--runs 15] [--profile]

The machine is one strand of blocks of five steps each, every block a map opened and folded
(text → words → upper per word → join → split → scale), each block fed by the head of the
one before; constants and named outputs throughout. Both sides get the same caps (the
reference through a registry with no aliases and media definitions without rules) and must
write the same canonical text. Prints the median time of each over ``--runs`` runs, the ratio,
and our time against the 20 ms target. A benchmark, not a test: nothing asserts a
time. ``--profile`` prints where our time goes (cProfile, top functions by own time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cartridge_runtime.machine import parse_machine
from cartridge_runtime.manifest import CapDef

#: The 200-step machine of the machine-notation target must parse and resolve within this (ours, median).
TARGET_MS: Final = 20.0
TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
SEP: Final = "media:enc=utf-8;sep"
RECORD: Final = "media:fmt=json;record"
FACTOR: Final = "media:factor;numeric"


def _cap(op: str, into: str, out: str, args: list[tuple[str, str, bool, bool]],
         outputs: list[tuple[str, str, bool]]) -> dict[str, Any]:  # fmt: skip
    """A cap as manifest JSON; args are (name, media, on stdin, a sequence)."""
    return {
        "urn": f'cap:in="{into}";op={op};out="{out}"',
        "title": op,
        "aliases": [op],
        "args": [
            {"media_urn": media, "name": name, "required": True, "is_sequence": sequence,
             "sources": [{"stdin": media} if stdin else {"cli_flag": f"--{name}"}]}
            for name, media, stdin, sequence in args
        ],
        "outputs": [
            {"media_urn": media, "name": name, "output_description": name,
             "is_sequence": sequence, "optional": name == "stats"}
            for name, media, sequence in outputs
        ],
    }  # fmt: skip


CAP_JSON: Final = [
    {"urn": "cap:effect=none", "title": "Identity", "aliases": ["identity"],
     "args": [{"media_urn": "media:", "name": "input", "required": True,
               "sources": [{"stdin": "media:"}]}],
     "outputs": [{"media_urn": "media:", "name": "output", "output_description": "output"}]},
    _cap("words", TEXT, WORD, [("text", TEXT, True, False)], [("words", WORD, True)]),
    _cap("upper", WORD, WORD, [("word", WORD, True, False)], [("upper", WORD, False)]),
    _cap("join", WORD, TEXT, [("words", WORD, True, True), ("sep", SEP, False, False)],
         [("text", TEXT, False)]),
    _cap("split", TEXT, TEXT, [("text", TEXT, True, False)],
         [("head", TEXT, False), ("stats", RECORD, False)]),
    _cap("scale", RECORD, RECORD, [("record", RECORD, True, False),
                                   ("factor", FACTOR, False, False)], [("record", RECORD, False)]),
]  # fmt: skip


def machine_text(steps: int) -> str:
    """A machine of ``steps`` steps (rounded up to whole blocks of five)."""
    lines = [f"{cap['aliases'][0]} {cap['urn']}" for cap in CAP_JSON[1:]]
    for i in range(-(-steps // 5)):
        source = "doc" if i == 0 else f"h{i - 1}"
        lines += [
            f"{source} -> words -> w{i}",
            f"w{i} -> upper{{retry=2}} -> u{i}",
            f'(u{i}, sep=", #{i}") -> join -> j{i}',
            f"j{i} -> split -> (head=h{i}, stats=s{i})",
            f"(record=s{i}, factor={i}.5) -> scale{{on_error=absent}} -> r{i}",
        ]
    return "\n".join(lines)


class _Registry:
    """What capdag's machine parser asks of a registry."""

    def __init__(self) -> None:
        from capdag.cap.definition import Cap

        self._caps = {}
        for data in CAP_JSON:
            cap = Cap.from_dict(data)
            self._caps[cap.urn.to_string()] = cap

    def get_cached_cap(self, urn: str) -> Any:
        return self._caps.get(urn)

    def resolve_alias_cached(self, name: str) -> None:
        return None

    def get_cached_media_def(self, urn: str) -> Any:
        return SimpleNamespace(validation=None, schema=None, title=urn)


def _median_ms(run: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="steps in the machine (>= 1)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each (>= 1)")
    parser.add_argument("--profile", action="store_true", help="profile ours after timing")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.runs < 1:
        print("error: --steps and --runs take a whole number of at least 1", file=sys.stderr)
        return 2
    try:
        from capdag.machine import serializer
        from capdag.machine.parser import parse_machine as reference_parse
    except ImportError:
        print("error: the reference (capdag) is not installed; run in the dev venv",
              file=sys.stderr)  # fmt: skip
        return 2

    text = machine_text(args.steps)
    caps = [CapDef.from_json(cap) for cap in CAP_JSON]
    registry = _Registry()
    ours = parse_machine(text, caps)
    theirs = reference_parse(text, registry)
    if ours.to_notation() != serializer.to_machine_notation_formatted(
        theirs, serializer.FORMAT_LINE_BASED
    ):
        print("error: the two canonical texts differ", file=sys.stderr)
        return 1

    ours_ms = _median_ms(lambda: parse_machine(text, caps), args.runs)
    reference_ms = _median_ms(lambda: reference_parse(text, registry), args.runs)
    verdict = "meets" if ours_ms <= TARGET_MS else "misses"
    print(f"machine: {len(ours)} steps, {len(ours.nodes)} nodes, {len(text)} characters")
    print(f"ours:      {ours_ms:9.2f} ms  (median of {args.runs})")
    print(f"reference: {reference_ms:9.2f} ms  (median of {args.runs})")
    print(f"ratio:     {reference_ms / ours_ms:9.2f}x  (reference / ours)")
    print(f"target:    {TARGET_MS:9.2f} ms  ours {verdict} it")
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.runs):
            parse_machine(text, caps)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
