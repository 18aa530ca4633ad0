"""Finding the paths to one target: iterative deepening, as the reference does it (PLAN-8 ..
PLAN-14).

Rules first:

1. For each depth ``d = 1 .. max_depth`` a depth-first search keeps the paths of exactly ``d``
   steps (ForEach steps count); the paths of all depths are gathered in one list.
2. A path ends the first time a cap step brings it to a type equivalent to the target; it has
   a cap step and never ends on a ForEach. Within one path no state (type, cardinality) is
   visited twice, except a step into the target.
3. The limit stops the gathering the moment it is reached; ranking comes after (PLAN-13).

Theory of operation: the depth-first search is an explicit stack (so paths can be yielded as
they are found). Before searching, a backward breadth-first pass over the finite state space
gives each state a lower bound on the steps still needed to reach the target; a branch whose
bound exceeds the depth left is not entered. Such a branch yields no path, so the paths found
and their order are exactly the reference's, with far less walking.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator
from typing import Final

from cartridge_runtime.urn import MediaUrn

from ._events import DepthComplete, PathFound, SearchComplete, SearchEvent
from ._graph import FOR_EACH, CapGraph
from ._plan import Plan, plan_of

__all__ = ("search",)

_FAR: Final = 1 << 30  # "cannot reach the target": larger than any depth

#: A search state: the type's canonical text, its cardinality, and whether a ForEach was the
#: last step (then only a one-value cap step may follow).
_State = tuple[str, bool, bool]


class _Query:
    """One query's view of the graph: which types are the target, and how far each state is
    from it."""

    def __init__(self, graph: CapGraph, target: MediaUrn) -> None:
        self.graph = graph
        self.target = target
        self._is_target: dict[str, bool] = {}
        self._successors: dict[_State, list[tuple[int, _State]]] = {}

    def is_target(self, text: str) -> bool:
        found = self._is_target.get(text)
        if found is None:
            found = self.graph.media(text).is_equivalent(self.target)
            self._is_target[text] = found
        return found

    def successors(self, state: _State) -> list[tuple[int, _State]]:
        """The moves a path in ``state`` may take, with the state each leads to (kept: the
        search asks again at every depth)."""
        found = self._successors.get(state)
        if found is None:
            found = self._successors[state] = self._moves_from(state)
        return found

    def _moves_from(self, state: _State) -> list[tuple[int, _State]]:
        text, is_sequence, pending = state
        edges = self.graph.edges
        found = []
        for index, out_sequence in self.graph.moves(text, is_sequence):
            if index == FOR_EACH:
                if pending:
                    continue
                found.append((index, (text, False, True)))
                continue
            edge = edges[index]
            if pending and edge.input_is_sequence:
                continue
            found.append((index, (edge.target.text, out_sequence, False)))
        return found

    def distances(self, start: _State) -> dict[_State, int]:
        """For each state reachable from ``start``: the fewest steps to a cap step into the
        target, ignoring the no-revisit rule (so a lower bound)."""
        seen = {start}
        queue = deque([start])
        reverse: dict[_State, list[_State]] = {}
        distance: dict[_State, int] = {}
        frontier: deque[_State] = deque()
        while queue:
            state = queue.popleft()
            for index, following in self.successors(state):
                at_target = index != FOR_EACH and self.is_target(following[0])
                if at_target and state not in distance:
                    distance[state] = 1
                    frontier.append(state)
                reverse.setdefault(following, []).append(state)
                if following not in seen:
                    seen.add(following)
                    queue.append(following)
        while frontier:
            state = frontier.popleft()
            step = distance[state] + 1
            for before in reverse.get(state, ()):
                if before not in distance:
                    distance[before] = step
                    frontier.append(before)
        return distance


def _paths_at_depth(
    query: _Query,
    start: _State,
    depth: int,
    distance: dict[_State, int],
) -> Iterator[tuple[int, ...]]:
    """Every path of exactly ``depth`` steps, in exploration order (PLAN-10 .. PLAN-12)."""
    successors = query.successors
    is_target = query.is_target
    far = _FAR
    path: list[int] = []
    visited = {start[:2]}
    # A frame: the state, its moves, the next move to try, the depth left.
    stack: list[tuple[_State, list[tuple[int, _State]], list[int], int]] = [
        (start, successors(start), [0], depth)
    ]
    while stack:
        state, moves, cursor, left = stack[-1]
        entered = False
        child_left = left - 1
        while cursor[0] < len(moves):
            index, following = moves[cursor[0]]
            cursor[0] += 1
            key = following[:2]
            at_target = is_target(following[0])
            if key in visited and not at_target:
                continue
            if at_target and index != FOR_EACH:
                # A cap step into the target ends the path: kept when it fills the depth.
                if child_left == 0:
                    yield (*path, index)
                continue
            if child_left == 0 or key in visited:
                continue
            if distance.get(following, far) > child_left:
                continue
            path.append(index)
            visited.add(key)
            stack.append((following, successors(following), [0], child_left))
            entered = True
            break
        if not entered:
            stack.pop()
            if stack:
                visited.discard(state[:2])
                path.pop()


def search(
    graph: CapGraph,
    source: MediaUrn,
    target: MediaUrn,
    *,
    is_sequence: bool,
    max_depth: int,
    limit: int,
) -> Generator[SearchEvent, None, None]:
    """The events of one search (PLAN-10 .. PLAN-14, PLAN-23); the last is
    :class:`SearchComplete` with the plans in rank order."""
    graph.learn(source)
    query = _Query(graph, target)
    start: _State = (source.text, is_sequence, False)
    distance = query.distances(start)
    plans: list[Plan] = []
    depths = 0
    limit_reached = False
    # A limit of zero or less gathers nothing, as the reference's does (PLAN-21).
    for depth in range(1, max_depth + 1 if limit > 0 else 1):
        depths = depth
        before = len(plans)
        if distance.get(start, _FAR) <= depth:
            for moves in _paths_at_depth(query, start, depth, distance):
                plan = plan_of(graph, source, target, moves)
                plans.append(plan)
                yield PathFound(plan=plan, index=len(plans) - 1, depth=depth)
                if len(plans) >= limit:
                    limit_reached = True
                    break
        yield DepthComplete(depth=depth, max_depth=max_depth, paths_found=len(plans) - before)
        if limit_reached:
            break
    # A stable sort: equal keys keep the order they were found in (PLAN-14).
    plans.sort(key=lambda plan: plan.rank_key)
    yield SearchComplete(plans=tuple(plans), depths_searched=depths, limit_reached=limit_reached)
