"""Every planner vector, whole: the same plans in the same order with the same notation bytes,
the same refusals, the same reachable targets (capdag 1.524.58's answers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _planner_vectors import FILES, caps_of, load

from cartridge_runtime.planner import (
    CapGraph,
    DepthComplete,
    KnitError,
    Plan,
    PlannerError,
    SearchComplete,
    find_paths,
    iter_paths,
    reachable_targets,
)


def _path_view(plan: Plan) -> dict[str, Any]:
    """The fields a vector path holds, from one of our plans."""
    view: dict[str, Any] = {
        "description": plan.description,
        "steps": [step.kind.value for step in plan.steps],
        "caps": [cap.text for cap in plan.caps],
        "outputs_taken": [
            None if step.other_output is None else step.other_output.text for step in plan.cap_steps
        ],
        "cap_steps": plan.cap_step_count,
        "total_steps": plan.total_steps,
        "specificity": plan.specificity,
        "rank_key": [plan.rank_key[0], plan.rank_key[1], list(plan.rank_key[2])],
    }
    try:
        view["notation"] = plan.to_notation()
        view["bracketed"] = plan.to_notation(bracketed=True)
    except KnitError as error:
        view["notation"] = None
        view["knit_error"] = error.kind
    return view


def _expected_view(path: dict[str, Any]) -> dict[str, Any]:
    keys = ["description", "caps", "cap_steps", "total_steps", "specificity", "rank_key"]
    view = {key: path[key] for key in keys}
    for optional in ("steps", "outputs_taken", "bracketed", "knit_error"):
        if optional in path:
            view[optional] = path[optional]
    view["notation"] = path["notation"]
    return view


def _check_paths(graph: CapGraph, query: dict[str, Any]) -> list[str]:
    expect = query["expect"]
    args = (graph, query["source"], query["target"])
    options = {"max_depth": query["max_depth"], "limit": query["limit"]}
    if not expect["ok"]:
        with pytest.raises(PlannerError) as refused:
            find_paths(*args, **options)
        return [] if refused.value.kind == expect["kind"] else [f"kind {refused.value.kind}"]
    problems = []
    plans = find_paths(*args, **options)
    got = [_path_view(plan) for plan in plans]
    want = [_expected_view(path) for path in expect["paths"]]
    for index, (ours, theirs) in enumerate(zip(got, want, strict=False)):
        mine = {key: ours.get(key) for key in theirs}
        if mine != theirs:
            problems.append(f"path {index}: {mine} != {theirs}")
    if len(got) != len(want):
        problems.append(f"{len(got)} paths, expected {len(want)}")
    events = list(iter_paths(*args, **options))
    depth_counts = [e.paths_found for e in events if isinstance(e, DepthComplete)]
    if depth_counts != expect["depth_counts"]:
        problems.append(f"depth counts {depth_counts} != {expect['depth_counts']}")
    summary = events[-1]
    assert isinstance(summary, SearchComplete)
    if [p.to_notation() if p.knittable else None for p in summary.plans] != [
        p["notation"] for p in expect["paths"]
    ]:
        problems.append("the streamed summary differs from find_paths")
    return problems


def _check_reachable(graph: CapGraph, query: dict[str, Any]) -> list[str]:
    expect = query["expect"]
    if not expect["ok"]:
        with pytest.raises(PlannerError) as refused:
            reachable_targets(graph, query["source"], max_depth=query["max_depth"])
        return [] if refused.value.kind == expect["kind"] else [f"kind {refused.value.kind}"]
    got = [
        {
            "media_urn": t.media_urn.text,
            "min_path_length": t.min_path_length,
            "path_count": t.path_count,
        }
        for t in reachable_targets(graph, query["source"], max_depth=query["max_depth"])
    ]
    return [] if got == expect["targets"] else [f"{got} != {expect['targets']}"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_query_of_the_file_agrees_with_the_reference(path: Path) -> None:
    data = load(path)
    graph = CapGraph.from_caps(caps_of(data))
    failures = {}
    for query in data["queries"]:
        check = _check_paths if query["op"] == "paths" else _check_reachable
        problems = check(graph, query)
        if problems:
            failures[query["id"]] = problems
    assert failures == {}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_fresh_graph_per_query_gives_the_same_answers(path: Path) -> None:
    """The lookups a graph keeps between queries change no answer."""
    data = load(path)
    shared = CapGraph.from_caps(caps_of(data))
    for query in data["queries"]:
        if query["op"] != "paths" or not query["expect"]["ok"]:
            continue
        args = (query["source"], query["target"])
        options = {"max_depth": query["max_depth"], "limit": query["limit"]}
        fresh = find_paths(caps_of(data), *args, **options)
        assert fresh == find_paths(shared, *args, **options), query["id"]


def test_the_vectors_are_all_there() -> None:
    queries = [q for path in FILES for q in load(path)["queries"]]
    assert len(FILES) == 19 and len(queries) == 246
