"""What the streaming search reports, in order (PLAN-23).

:func:`~cartridge_runtime.planner.iter_paths` yields a :class:`PathFound` the moment a path is
found (search order, not rank order), a :class:`DepthComplete` after each depth it searched,
and one :class:`SearchComplete` last, holding the ranked answer.
"""

from __future__ import annotations

import attrs

from ._plan import Plan

__all__ = ("PathFound", "DepthComplete", "SearchComplete", "SearchEvent")


@attrs.frozen(kw_only=True)
class PathFound:
    """A path was found. ``index`` counts found paths from 0, in search order."""

    plan: Plan
    index: int
    depth: int


@attrs.frozen(kw_only=True)
class DepthComplete:
    """The search of one depth is over; ``paths_found`` is how many paths it added."""

    depth: int
    max_depth: int
    paths_found: int


@attrs.frozen(kw_only=True)
class SearchComplete:
    """The search is over.

    :ivar plans: every plan found, in rank order (what :func:`find_paths` returns).
    :ivar depths_searched: how many depths were searched (the last one may be cut).
    :ivar limit_reached: the limit stopped the search; deeper or later paths may exist.
    """

    plans: tuple[Plan, ...]
    depths_searched: int
    limit_reached: bool

    @property
    def total_paths(self) -> int:
        return len(self.plans)


SearchEvent = PathFound | DepthComplete | SearchComplete
