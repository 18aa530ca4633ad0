"""Properties over generated cap sets: every plan re-reads as the machine it writes, and our
answers are capdag 1.524.58's (the reference runs here as a test-only peer)."""

from __future__ import annotations

from typing import Any

import pytest
from _planner_reference import (
    QUERY_TYPES,
    SOURCE_TYPES,
    cap_sets,
    reference_fab,
    reference_paths,
    reference_reachable,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.machine import parse_machine
from cartridge_runtime.manifest import CapDef
from cartridge_runtime.planner import (
    CapGraph,
    DepthComplete,
    KnitError,
    PathFound,
    PlannerError,
    SearchComplete,
    StepKind,
    find_paths,
    iter_paths,
    reachable_targets,
)

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUERY = st.sampled_from(QUERY_TYPES)
SOURCE = st.sampled_from(SOURCE_TYPES)


def _defs(caps_json: list[dict[str, Any]]) -> list[CapDef]:
    return [CapDef.from_json(data) for data in caps_json]


def _graph_or_none(caps: list[CapDef]) -> CapGraph | None:
    try:
        return CapGraph.from_caps(caps)
    except PlannerError:
        return None


@SETTINGS
@given(
    caps_json=cap_sets(),
    source=SOURCE,
    target=QUERY,
    is_sequence=st.booleans(),
    max_depth=st.integers(1, 5),
    limit=st.integers(1, 25),
)
def test_every_plan_reads_back_as_the_machine_it_writes(
    caps_json: list[dict[str, Any]],
    source: str,
    target: str,
    is_sequence: bool,
    max_depth: int,
    limit: int,
) -> None:
    caps = _defs(caps_json)
    if _graph_or_none(caps) is None:
        return
    plans = find_paths(
        caps, source, target, is_sequence=is_sequence, max_depth=max_depth, limit=limit
    )
    assert len(plans) <= limit
    assert [p.rank_key for p in plans] == sorted(p.rank_key for p in plans)
    for plan in plans:
        assert plan.cap_step_count >= 1 and plan.total_steps <= max_depth
        assert plan.steps[-1].kind is StepKind.CAP
        assert plan.steps[-1].output_media.is_equivalent(plan.target)
        try:
            text = plan.to_notation()
        except KnitError as error:
            assert error.kind == "UnmatchedSourceInCapArgsError"
            assert plan.cap_steps[0].arg_name is None
            continue
        again = parse_machine(text, caps)
        assert again.to_notation() == text
        assert again.to_notation(bracketed=True) == plan.to_notation(bracketed=True)
        assert again == plan.machine
        if not is_sequence:  # the machine's input is one value, whatever the source was
            per_item = [step.placement.per_item for step in plan.machine.steps]
            assert per_item == [step.per_item for step in plan.cap_steps]


@SETTINGS
@given(caps_json=cap_sets(), source=QUERY, target=QUERY, limit=st.integers(1, 6))
def test_the_stream_reports_what_find_paths_answers(
    caps_json: list[dict[str, Any]], source: str, target: str, limit: int
) -> None:
    caps = _defs(caps_json)
    if _graph_or_none(caps) is None:
        return
    events = list(iter_paths(caps, source, target, max_depth=4, limit=limit))
    summary = events[-1]
    assert isinstance(summary, SearchComplete)
    assert list(summary.plans) == find_paths(caps, source, target, max_depth=4, limit=limit)
    found = [e.plan for e in events if isinstance(e, PathFound)]
    assert sorted(found, key=lambda p: p.rank_key) == list(summary.plans)
    depths = [e for e in events if isinstance(e, DepthComplete)]
    assert sum(d.paths_found for d in depths) == len(found)
    assert summary.limit_reached == (len(found) == limit)
    assert [d.depth for d in depths] == list(range(1, summary.depths_searched + 1))


@pytest.mark.interop
@SETTINGS
@given(
    caps_json=cap_sets(),
    source=SOURCE,
    target=QUERY,
    is_sequence=st.booleans(),
    max_depth=st.integers(1, 5),
    limit=st.integers(1, 25),
)
def test_paths_agree_with_the_reference_planner(
    caps_json: list[dict[str, Any]],
    source: str,
    target: str,
    is_sequence: bool,
    max_depth: int,
    limit: int,
) -> None:
    try:
        fab, registry = reference_fab(caps_json)
    except ValueError:
        # The reference refuses a cap with data in and no main input; so do we.
        with pytest.raises(PlannerError) as refused:
            CapGraph.from_caps(_defs(caps_json))
        assert refused.value.kind == "InvalidInputError"
        return
    theirs = reference_paths(
        fab, registry, source, target, is_sequence=is_sequence, max_depth=max_depth, limit=limit
    )
    plans = find_paths(
        _defs(caps_json),
        source,
        target,
        is_sequence=is_sequence,
        max_depth=max_depth,
        limit=limit,
    )
    ours = []
    for plan in plans:
        try:
            text = plan.to_notation()
        except KnitError as error:
            text = error.kind
        ours.append((plan.description, tuple(c.text for c in plan.caps), text))
    assert ours == theirs


@pytest.mark.interop
@SETTINGS
@given(
    caps_json=cap_sets(),
    source=SOURCE,
    is_sequence=st.booleans(),
    max_depth=st.integers(1, 6),
)
def test_reachable_targets_agree_with_the_reference_planner(
    caps_json: list[dict[str, Any]], source: str, is_sequence: bool, max_depth: int
) -> None:
    graph = _graph_or_none(_defs(caps_json))
    if graph is None:
        return
    fab, _ = reference_fab(caps_json)
    theirs = reference_reachable(fab, source, is_sequence=is_sequence, max_depth=max_depth)
    ours = [
        (t.media_urn.text, t.min_path_length, t.path_count)
        for t in reachable_targets(graph, source, is_sequence=is_sequence, max_depth=max_depth)
    ]
    assert ours == theirs


def _cap(urn: str, arg: tuple[str, bool], *outs: tuple[str, str, bool]) -> dict[str, Any]:
    media, seq = arg
    return {
        "urn": urn,
        "title": urn,
        "aliases": [urn.split("op=")[1].split(";")[0]],
        "args": [
            {
                "media_urn": media,
                "name": "in0",
                "required": True,
                "sources": [{"stdin": media}],
                "is_sequence": seq,
            }
        ],
        "outputs": [
            {"media_urn": m, "name": name, "output_description": name, "is_sequence": s}
            for name, m, s in outs
        ],
    }


@pytest.mark.parametrize("per_item_output_is_sequence", [True, False])
def test_a_sequence_input_cap_in_a_map_runs_per_item_on_a_sequence_made_per_item(
    per_item_output_is_sequence: bool,
) -> None:
    """Inside a map, a cap taking a sequence gathers the items when each item is one value,
    and runs once per item when each item's step made a sequence: the plan says what the
    machine it writes runs (MCH-8)."""
    caps = _defs(
        [
            _cap(
                'cap:in="media:a";op=split;out="media:c"',
                ("media:a", False),
                ("parts", "media:c", True),
            ),
            _cap(
                'cap:in="media:c";op=expand;out="media:d"',
                ("media:c", False),
                ("out0", "media:d", per_item_output_is_sequence),
            ),
            _cap(
                'cap:in="media:d";op=fold;out="media:b"',
                ("media:d", True),
                ("out0", "media:b", False),
            ),
        ]
    )
    (plan,) = find_paths(caps, "media:a", "media:b", max_depth=4, limit=5)
    kinds = [StepKind.CAP, StepKind.FOR_EACH, StepKind.CAP, StepKind.CAP]
    assert [s.kind for s in plan.steps] == kinds
    assert [s.per_item for s in plan.cap_steps] == [False, True, per_item_output_is_sequence]
    machine = parse_machine(plan.to_notation(), caps)
    assert [s.placement.per_item for s in machine.steps] == [s.per_item for s in plan.cap_steps]
