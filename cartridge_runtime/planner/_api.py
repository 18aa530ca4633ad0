"""The planner's public verbs: checked arguments in, plans or targets out (PLAN-20 .. PLAN-23).

Each verb reads its media texts (the source before the target), checks its depth and limit,
builds the cap graph (or takes one already built) and runs the sans-IO search.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Final

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.urn import MediaUrn, UrnError

from ._errors import InvalidInputError, InvalidMediaError, NotFoundError
from ._events import SearchComplete, SearchEvent
from ._explain import NoPath, explain
from ._graph import CapGraph
from ._plan import Plan
from ._reach import ReachableTarget, reachable
from ._search import search

__all__ = (
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_LIMIT",
    "MAX_SEARCH_DEPTH",
    "Caps",
    "find_paths",
    "best_path",
    "iter_paths",
    "reachable_targets",
    "explain_no_path",
)

#: The depth a query searches to when none is given (the reference's default).
DEFAULT_MAX_DEPTH: Final = 10
#: How many paths a query gathers when no limit is given (the reference's default).
DEFAULT_LIMIT: Final = 20
#: The deepest search accepted: the work grows exponentially with depth, so a larger value is
#: a mistake that would look like a hang (PLAN-21).
MAX_SEARCH_DEPTH: Final = 64

#: What a query takes as its caps: cap definitions, a manifest (all its caps), or a graph
#: built once with :meth:`CapGraph.from_caps`.
Caps = CapGraph | Manifest | Iterable[CapDef]


def _media(text: str | MediaUrn, role: str) -> MediaUrn:
    """``text`` read as a media URN (PLAN-20)."""
    if isinstance(text, MediaUrn):
        return text
    if not isinstance(text, str):
        raise InvalidMediaError(
            f"the {role} must be a media URN text, not {type(text).__name__}",
            kind="MediaUrnError",
        )
    try:
        return MediaUrn.parse(text)
    except UrnError as error:
        raise InvalidMediaError(
            f"the {role} {text!r} is not a media URN: {error}", kind=type(error).__name__
        ) from None


def _count(value: int, name: str, ceiling: int | None = None) -> int:
    """``value`` checked as a whole number, at most ``ceiling`` (PLAN-21). Zero or less is
    accepted and answers nothing, as the reference answers."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be a whole number, not {value!r}")
    if ceiling is not None and value > ceiling:
        raise InvalidInputError(f"{name} must be at most {ceiling}, not {value}")
    return value


def iter_paths(
    caps: Caps,
    source_media: str | MediaUrn,
    target_media: str | MediaUrn,
    *,
    is_sequence: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limit: int = DEFAULT_LIMIT,
) -> Generator[SearchEvent, None, None]:
    """Search step by step: a :class:`PathFound` as each path is found, a
    :class:`DepthComplete` after each depth, a :class:`SearchComplete` last (PLAN-23).

    The arguments are checked before the first event (the call itself raises), so a bad
    query never starts a search. Closing the iterator early stops the search.

    :raises InvalidMediaError: the source or target text is not a media URN.
    :raises InvalidInputError: a bad depth or limit, or a cap the graph cannot hold.
    """
    source = _media(source_media, "source")
    target = _media(target_media, "target")
    depth = _count(max_depth, "max_depth", MAX_SEARCH_DEPTH)
    count = _count(limit, "limit")
    graph = CapGraph.from_caps(caps)
    return search(
        graph, source, target, is_sequence=bool(is_sequence), max_depth=depth, limit=count
    )


def find_paths(
    caps: Caps,
    source_media: str | MediaUrn,
    target_media: str | MediaUrn,
    *,
    is_sequence: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limit: int = DEFAULT_LIMIT,
) -> list[Plan]:
    """The ways to turn ``source_media`` into exactly ``target_media``, best first
    (PLAN-8 .. PLAN-14). No way is an empty list.

    The limit acts as the reference's does: the search stops once ``limit`` paths are
    gathered, shorter depths first, and those are ranked (PLAN-13).

    :raises InvalidMediaError: the source or target text is not a media URN.
    :raises InvalidInputError: a bad depth or limit, or a cap the graph cannot hold.
    """
    events = iter_paths(
        caps,
        source_media,
        target_media,
        is_sequence=is_sequence,
        max_depth=max_depth,
        limit=limit,
    )
    for event in events:
        if isinstance(event, SearchComplete):
            return list(event.plans)
    raise AssertionError("a search always ends with its summary")  # pragma: no cover


def best_path(
    caps: Caps,
    source_media: str | MediaUrn,
    target_media: str | MediaUrn,
    *,
    is_sequence: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limit: int = DEFAULT_LIMIT,
) -> Plan:
    """The first plan of :func:`find_paths`, or a refusal that says why there is none
    (PLAN-22).

    :raises NotFoundError: no plan within ``max_depth``; the message says why
        (:func:`explain_no_path`) and names the nearest targets that can be made.
    :raises InvalidMediaError: the source or target text is not a media URN.
    :raises InvalidInputError: a bad depth or limit, or a cap the graph cannot hold.
    """
    graph = CapGraph.from_caps(caps)
    plans = find_paths(
        graph,
        source_media,
        target_media,
        is_sequence=is_sequence,
        max_depth=max_depth,
        limit=limit,
    )
    if plans:
        return plans[0]
    found = explain_no_path(
        graph, source_media, target_media, is_sequence=is_sequence, max_depth=max_depth
    )
    raise NotFoundError(found.message)


def explain_no_path(
    caps: Caps,
    source_media: str | MediaUrn,
    target_media: str | MediaUrn,
    *,
    is_sequence: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> NoPath:
    """Why no plan of at most ``max_depth`` steps turns the source into the target, and the
    types the source can become that are nearest the target (PLAN-22, PLAN-26). Ask it after
    :func:`find_paths` found nothing; it does not search for paths itself.

    :raises InvalidMediaError: the source or target text is not a media URN.
    :raises InvalidInputError: a bad depth, or a cap the graph cannot hold.
    """
    source = _media(source_media, "source")
    target = _media(target_media, "target")
    depth = _count(max_depth, "max_depth", MAX_SEARCH_DEPTH)
    graph = CapGraph.from_caps(caps)
    return explain(
        graph,
        source,
        target,
        is_sequence=bool(is_sequence),
        max_depth=depth,
        deepest=MAX_SEARCH_DEPTH,
    )


def reachable_targets(
    caps: Caps,
    source_media: str | MediaUrn,
    *,
    is_sequence: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[ReachableTarget]:
    """Every type ``source_media`` can be turned into within ``max_depth`` steps, nearest
    first (PLAN-15, PLAN-16). A type no cap takes reaches nothing: an empty list.

    :raises InvalidMediaError: the source text is not a media URN.
    :raises InvalidInputError: a bad depth, or a cap the graph cannot hold.
    """
    source = _media(source_media, "source")
    depth = _count(max_depth, "max_depth", MAX_SEARCH_DEPTH)
    graph = CapGraph.from_caps(caps)
    return reachable(graph, source, is_sequence=bool(is_sequence), max_depth=depth)
