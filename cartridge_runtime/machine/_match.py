"""Placing the members that name no arg: minimum-cost matching by type (MCH-4).

Pairing a source with an arg costs how much more the source says than the arg asks
(``spec(source) - spec(arg)``) and is possible only when the source conforms to what the arg
accepts. Two phases, the first that has an assignment decides:

1. *product*: each source takes a different arg;
2. *gather*: only when no product exists, a sequence arg may take several sources.

The minimum-cost assignment of the deciding phase must be unique; an assignment that leaves
out the arg that must be bound (the main input, when some source can feed it) is not an
assignment. The search is exhaustive, which is fine for the handful of members a wiring has.
"""

from __future__ import annotations

from collections.abc import Sequence

from cartridge_runtime.urn import MediaUrn

from ._order import conforms, media_key

__all__ = ("MatchFailure", "match_sources")


class MatchFailure(Exception):
    """No unique assignment. ``undecided`` lists, for an ambiguity, each source the tied
    assignments place differently with the args they place it on; otherwise ``source`` is a
    source that fits nothing left for it."""

    def __init__(
        self, source: int = 0, undecided: tuple[tuple[int, tuple[int, ...]], ...] | None = None
    ) -> None:
        super().__init__(source, undecided)
        self.source = source
        self.undecided = undecided

    @property
    def ambiguous(self) -> bool:
        return self.undecided is not None


def _assignments(
    cost: list[list[int | None]], must_bind: int | None, can_gather: Sequence[bool]
) -> list[list[int]]:
    arg_count = len(cost[0]) if cost else 0
    best: list[list[int]] = []
    best_cost: int | None = None
    current = [0] * len(cost)
    used = [False] * arg_count

    def place(source: int, total: int) -> None:
        nonlocal best_cost, best
        if best_cost is not None and total > best_cost:
            return  # costs are never negative: this branch cannot tie or win
        if source == len(cost):
            if must_bind is not None and must_bind not in current:
                return
            if best_cost is None or total < best_cost:
                best_cost, best = total, [list(current)]
            else:
                best.append(list(current))
            return
        row = cost[source]
        for arg in range(arg_count):
            step = row[arg]
            if step is None or (used[arg] and not can_gather[arg]):
                continue
            was = used[arg]
            used[arg] = True
            current[source] = arg
            place(source + 1, total + step)
            used[arg] = was

    place(0, 0)
    return best


def _unique(
    best: list[list[int]], sources: Sequence[MediaUrn], args: Sequence[MediaUrn]
) -> list[tuple[MediaUrn, MediaUrn]]:
    if len(best) == 1:
        pairs = [(args[arg], sources[source]) for source, arg in enumerate(best[0])]
        pairs.sort(key=lambda pair: media_key(pair[0]))
        return pairs
    undecided = []
    for source in range(len(sources)):
        places = sorted({assignment[source] for assignment in best})
        if len(places) > 1:
            undecided.append((source, tuple(places)))
    raise MatchFailure(undecided=tuple(undecided))


def match_sources(
    sources: Sequence[MediaUrn],
    args: Sequence[MediaUrn],
    arg_is_sequence: Sequence[bool],
    must_bind: int | None,
) -> list[tuple[MediaUrn, MediaUrn]]:
    """The unique minimum-cost assignment of ``sources`` to ``args`` (what each accepts), as
    ``(arg, source)`` pairs sorted by the arg's URN, stably (sources gathered on one arg keep
    their written order, the order of the gathered items).

    :raises MatchFailure: no assignment, or several that tie.
    """
    fits = [any(conforms(source, arg) for arg in args) for source in sources]
    if len(sources) > len(args) and not any(arg_is_sequence):
        raise MatchFailure(source=fits.index(False) if False in fits else 0)
    cost: list[list[int | None]] = []
    for position, source in enumerate(sources):
        if not fits[position]:
            raise MatchFailure(source=position)
        cost.append(
            [
                source.specificity - arg.specificity if conforms(source, arg) else None
                for arg in args
            ]
        )
    if must_bind is not None and all(row[must_bind] is None for row in cost):
        must_bind = None
    if len(sources) <= len(args):
        best = _assignments(cost, must_bind, [False] * len(args))
        if best:
            return _unique(best, sources, args)
    if not any(arg_is_sequence):
        raise MatchFailure(source=0)
    best = _assignments(cost, must_bind, arg_is_sequence)
    if not best:
        raise MatchFailure(source=0)
    return _unique(best, sources, args)
