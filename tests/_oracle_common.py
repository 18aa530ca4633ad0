"""Shared pieces of the differential runs against the reference's formal model.

capdag 1.524.58 ships ``capdag._formal``: its protocol decisions written in Lean, proved, and
compiled to a shared library. Each ``_oracle_*`` module drives one area of ours and the model
with the same generated cases and lists every case where the two decide differently.

An area runner is ``run(n, rng) -> AreaResult``: ``n`` cases at least (the exhaustive small
domain first, random cases beyond it), drawn from ``rng`` so a seed repeats a run. The test
suite runs a small sample of each area; ``benchmarks/oracle_diff.py`` runs the full set.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs


@attrs.define
class AreaResult:
    """What one area's run found: how many cases it compared and where the sides differ."""

    area: str
    cases: int = 0
    #: One line per disagreement (the case and both answers); at most ``KEEP`` are kept.
    disagreements: list[str] = attrs.field(factory=list)
    #: Every disagreement counted, also those not kept.
    disagreement_count: int = 0

    KEEP = 20

    def differ(self, what: str) -> None:
        self.disagreement_count += 1
        if len(self.disagreements) < self.KEEP:
            self.disagreements.append(what)

    def check(self, what: str, ours: object, model: object) -> None:
        """Compare one decision; a difference is recorded with ``what`` naming the case."""
        if ours != model:
            self.differ(f"{what}: ours {ours!r}, model {model!r}")


Runner = Callable[[int, random.Random], AreaResult]
