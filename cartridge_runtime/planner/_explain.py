"""Why there is no way: the reason a query found no plan, and the targets that do exist near
the one asked (PLAN-22, PLAN-26).

Rules first:

1. The reason is the first that holds of: no cap takes the source; no cap gives the target;
   the source reaches the target only in more steps than the depth allows (the steps it
   needs are said); the source never reaches the target.
2. The nearest targets are types the source does reach (within the deepest search accepted)
   that share the most tags with the target: a type that is a refinement or a
   generalisation of the target comes first, then more tags in common, fewer tags apart,
   fewer steps, and the text. A type with no tag in common is not offered.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from cartridge_runtime.urn import MediaUrn

from ._graph import CapGraph
from ._reach import ReachableTarget, reachable

__all__ = ("NoPathReason", "NoPath", "explain", "nearest_targets")

#: How many nearest targets a report names.
NEAREST: Final = 3


class NoPathReason(enum.StrEnum):
    """Why a query found no plan (PLAN-22)."""

    NO_CAP_TAKES_SOURCE = "no_cap_takes_source"  #: no cap's ``in=`` accepts the source
    NO_CAP_GIVES_TARGET = "no_cap_gives_target"  #: no edge leads to a type equivalent to it
    DEPTH_RAN_OUT = "depth_ran_out"  #: a longer path exists
    NOT_CONNECTED = "not_connected"  #: what the source reaches never includes the target


@attrs.frozen(kw_only=True)
class NoPath:
    """A query with no plan, and why (PLAN-22, PLAN-26).

    :ivar source: the source asked.
    :ivar target: the target asked.
    :ivar reason: why no plan was found.
    :ivar max_depth: the depth searched.
    :ivar steps_needed: with :attr:`NoPathReason.DEPTH_RAN_OUT`, the fewest steps a path
        needs when that is more than the depth searched (a lower bound: it ignores the
        no-revisit rule); else ``None``.
    :ivar nearest: the reachable types closest to the target, best first.
    """

    source: MediaUrn
    target: MediaUrn
    reason: NoPathReason
    max_depth: int
    steps_needed: int | None = None
    nearest: tuple[ReachableTarget, ...] = ()

    @property
    def message(self) -> str:
        """One line for a person: the reason, then the nearest targets when there are any."""
        reasons = {
            NoPathReason.NO_CAP_TAKES_SOURCE: f"no cap takes {self.source}",
            NoPathReason.NO_CAP_GIVES_TARGET: f"no cap gives exactly {self.target}",
            NoPathReason.DEPTH_RAN_OUT: (
                f"the depth ran out: a path needs at least {self.steps_needed} steps, "
                f"{self.max_depth} were searched"
                if self.steps_needed is not None
                else f"no path of at most {self.max_depth} steps leads there"
            ),
            NoPathReason.NOT_CONNECTED: f"nothing {self.source} becomes leads to {self.target}",
        }
        text = f"no plan turns {self.source} into {self.target}: {reasons[self.reason]}"
        if self.nearest:
            named = ", ".join(
                f"{near.media_urn} ({_steps(near.min_path_length)})" for near in self.nearest
            )
            text += f"; nearest targets that can be made: {named}"
        return text


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def _closeness(target: MediaUrn, near: ReachableTarget) -> tuple[int, int, int, int, str]:
    """A sort key: smaller is nearer."""
    mine = set(target.tags.items())
    theirs = set(near.media_urn.tags.items())
    related = near.media_urn.is_comparable(target)
    return (
        0 if related else 1,
        -len(mine & theirs),
        len(mine ^ theirs),
        near.min_path_length,
        near.media_urn.text,
    )


def nearest_targets(
    graph: CapGraph, source: MediaUrn, target: MediaUrn, *, is_sequence: bool, deepest: int
) -> tuple[ReachableTarget, ...]:
    """The reachable types closest to ``target`` (rule 2), at most :data:`NEAREST`."""
    found = reachable(graph, source, is_sequence=is_sequence, max_depth=deepest)
    wanted = set(target.tags.items())
    candidates = [
        near
        for near in found
        if not near.media_urn.is_equivalent(target)
        and (wanted & set(near.media_urn.tags.items()) or near.media_urn.is_comparable(target))
        and not near.media_urn.is_top()
    ]
    candidates.sort(key=lambda near: _closeness(target, near))
    return tuple(candidates[:NEAREST])


def explain(
    graph: CapGraph,
    source: MediaUrn,
    target: MediaUrn,
    *,
    is_sequence: bool,
    max_depth: int,
    deepest: int,
) -> NoPath:
    """Why no plan of at most ``max_depth`` steps turns ``source`` into ``target`` (rule 1),
    looking as deep as ``deepest`` for the steps a path would need."""
    graph.learn(source)
    nearest = nearest_targets(graph, source, target, is_sequence=is_sequence, deepest=deepest)

    def refused(reason: NoPathReason, steps: int | None = None) -> NoPath:
        return NoPath(
            source=source,
            target=target,
            reason=reason,
            max_depth=max_depth,
            steps_needed=steps,
            nearest=nearest,
        )

    if not any(source.conforms_to(edge.source) for edge in graph.edges):
        return refused(NoPathReason.NO_CAP_TAKES_SOURCE)
    if not any(edge.target.is_equivalent(target) for edge in graph.edges):
        return refused(NoPathReason.NO_CAP_GIVES_TARGET)
    deep = reachable(graph, source, is_sequence=is_sequence, max_depth=deepest)
    steps = [near.min_path_length for near in deep if near.media_urn.is_equivalent(target)]
    if not steps:
        return refused(NoPathReason.NOT_CONNECTED)
    # Reached within the depth but no path kept: the no-revisit rule cut it (PLAN-12).
    return refused(NoPathReason.DEPTH_RAN_OUT, min(steps) if min(steps) > max_depth else None)
