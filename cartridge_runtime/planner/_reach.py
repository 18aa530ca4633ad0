"""Every type a source can be turned into, with how soon and how often (PLAN-15, PLAN-16).

Rules first:

1. A breadth-first walk from the source; a state is (type, cardinality, last step a ForEach).
   Each state is expanded once, at its shallowest arrival; each expansion makes one arrival
   per move it may take; arrivals deeper than ``max_depth`` are dropped.
2. One record per type arrived at by a cap step: the fewest steps (ForEach steps count) and
   the number of arrivals (not of distinct paths). Records sort by steps, then by text.
"""

from __future__ import annotations

from collections import deque

import attrs

from cartridge_runtime.urn import MediaUrn

from ._graph import FOR_EACH, CapGraph

__all__ = ("ReachableTarget", "reachable")


@attrs.frozen(kw_only=True)
class ReachableTarget:
    """A type the source can be turned into (PLAN-16).

    :ivar media_urn: the type (its text is canonical).
    :ivar min_path_length: the fewest steps that reach it, ForEach steps included.
    :ivar path_count: how many arrivals the walk made at it within the depth: a measure of
        how many ways lead there, not the number of distinct paths.
    """

    media_urn: MediaUrn
    min_path_length: int
    path_count: int


def reachable(
    graph: CapGraph, source: MediaUrn, *, is_sequence: bool, max_depth: int
) -> list[ReachableTarget]:
    """The reachable targets of ``source`` in the reference's order (PLAN-15, PLAN-16)."""
    graph.learn(source)
    edges = graph.edges
    moves = graph.moves
    expanded: set[tuple[str, bool, bool]] = set()
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    queue: deque[tuple[str, bool, bool, int]] = deque()

    def expand(text: str, sequence: bool, pending: bool, depth: int) -> None:
        if depth >= max_depth:
            return  # every arrival it would make is deeper than the limit
        for index, out_sequence in moves(text, sequence):
            if index == FOR_EACH:
                if not pending:
                    queue.append((text, False, True, depth + 1))
                continue
            edge = edges[index]
            if pending and edge.input_is_sequence:
                continue
            queue.append((edge.target.text, out_sequence, False, depth + 1))

    expand(source.text, is_sequence, False, 0)
    while queue:
        text, sequence, pending, depth = queue.popleft()
        if not pending:
            if text in count:
                count[text] += 1
            else:
                count[text] = 1
                first[text] = depth
        key = (text, sequence, pending)
        if key in expanded:
            continue
        expanded.add(key)
        expand(text, sequence, pending, depth)
    found = [
        ReachableTarget(
            media_urn=graph.media(text), min_path_length=first[text], path_count=count[text]
        )
        for text in count
    ]
    found.sort(key=lambda target: (target.min_path_length, target.media_urn.text))
    return found
