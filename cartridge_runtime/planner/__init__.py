"""The planner: from the caps at hand, the ranked ways to turn one media type into another
(sans-IO).

:func:`find_paths` answers what capdag 1.524.58's planner answers for the same caps and query
(the same plans, in the same order); each :class:`Plan` lists its steps for display and knits
into a :class:`~cartridge_runtime.machine.Machine` whose canonical text
(:meth:`Plan.to_notation`) is the reference's, byte for byte. :func:`reachable_targets` lists
every type a source can become; :func:`iter_paths` reports paths while the search goes on;
:func:`best_path` refuses with a reason when there is no way, and :func:`explain_no_path` gives
that reason with the nearest targets that can be made. A plan lists the side arguments it
needs (:attr:`Plan.needs`); :func:`complete_first` puts the plans that need none first, and
:meth:`Plan.machine_with` binds them. On the input side,
:func:`detect_media` tells the media URN a file is (its extension, confirmed or corrected by a
bounded look at its content) and :func:`resolve_inputs` turns files, folders and globs into a
detected input set. Every refusal is a
:class:`PlannerError` whose ``kind`` is the reference's error class name. The rules are in
``protocol_spec/14-planning.md`` (``PLAN-n``).

Example::

    plans = find_paths(manifest, "media:document;ext=pdf", "media:enc=utf-8;word")
    for plan in plans:
        print(plan.description)         # pages → ForEach → ocr → words
    machine = plans[0].machine          # ready for the engine
"""

from __future__ import annotations

from ._api import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_DEPTH,
    MAX_SEARCH_DEPTH,
    Caps,
    best_path,
    explain_no_path,
    find_paths,
    iter_paths,
    reachable_targets,
)
from ._detect import (
    SNIFF_BYTES,
    Decision,
    DetectedInput,
    InputError,
    InputNotFound,
    InputSet,
    InputUnreadable,
    InvalidDeclaredMedia,
    InvalidGlob,
    NoFilesMatched,
    NoInputs,
    detect_bytes,
    detect_file,
    detect_media,
    expand_inputs,
    resolve_inputs,
)
from ._errors import InvalidInputError, InvalidMediaError, KnitError, NotFoundError, PlannerError
from ._events import DepthComplete, PathFound, SearchComplete, SearchEvent
from ._explain import NoPath, NoPathReason
from ._graph import CapGraph, Edge
from ._plan import Plan, PlanStep, StepKind, complete_first
from ._reach import ReachableTarget
from ._source import PlanningSource, SourceLike, planning_source

__all__ = (
    "find_paths",
    "best_path",
    "iter_paths",
    "reachable_targets",
    "explain_no_path",
    "complete_first",
    "NoPath",
    "NoPathReason",
    "CapGraph",
    "Edge",
    "Caps",
    "Plan",
    "PlanStep",
    "StepKind",
    "ReachableTarget",
    "PathFound",
    "DepthComplete",
    "SearchComplete",
    "SearchEvent",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_LIMIT",
    "MAX_SEARCH_DEPTH",
    "PlannerError",
    "InvalidMediaError",
    "InvalidInputError",
    "NotFoundError",
    "KnitError",
    "planning_source",
    "PlanningSource",
    "SourceLike",
    "detect_media",
    "detect_file",
    "detect_bytes",
    "expand_inputs",
    "resolve_inputs",
    "DetectedInput",
    "InputSet",
    "Decision",
    "SNIFF_BYTES",
    "InputError",
    "NoInputs",
    "InputNotFound",
    "InputUnreadable",
    "InvalidGlob",
    "NoFilesMatched",
    "InvalidDeclaredMedia",
)
