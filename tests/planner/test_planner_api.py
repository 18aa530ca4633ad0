"""The planner's public face: names, sans-IO, plan values, the stream, the limit's rule."""

from __future__ import annotations

import subprocess
import sys
from typing import Final

import pytest

import cartridge_runtime.planner as planner
from cartridge_runtime.manifest import CapDef, OutputDef, identity_cap
from cartridge_runtime.planner import (
    CapGraph,
    DepthComplete,
    PathFound,
    SearchComplete,
    StepKind,
    find_paths,
    iter_paths,
    reachable_targets,
)

TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
PDF: Final = "media:document;ext=pdf"
PAGE: Final = "media:ext=png;image;page"
FIGURE: Final = "media:figure;image"


def _caps() -> list[CapDef]:
    return [
        identity_cap(),
        CapDef.simple(f'cap:in="{PDF}";op=extract;out="{TEXT}"', "extract", aliases="extract",
                      input_name="doc", output_name="text",
                      extra_outputs=[OutputDef(media_urn=FIGURE, name="figures",
                                               output_description="figures")]),
        CapDef.simple(f'cap:in="{PDF}";op=pages;out="{PAGE}"', "pages", aliases="pages",
                      input_name="doc", output_name="pages", output_is_sequence=True),
        CapDef.simple(f'cap:in=media:image;op=ocr;out="{TEXT}"', "ocr", aliases="ocr",
                      input_name="image", output_name="text"),
        CapDef.simple(f'cap:in="{TEXT}";op=words;out="{WORD}"', "words", aliases="words",
                      input_name="text", output_name="words", output_is_sequence=True),
    ]  # fmt: skip


def test_every_public_name_resolves() -> None:
    assert isinstance(planner.__all__, tuple)
    assert len(set(planner.__all__)) == len(planner.__all__)
    for name in planner.__all__:
        assert getattr(planner, name) is not None, name


def test_the_planner_is_sans_io() -> None:
    code = (
        "import sys; import cartridge_runtime.planner; "
        "print([m for m in ('anyio', 'asyncio', 'trio', 'socket', 'subprocess') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plan_lists_its_steps_for_display() -> None:
    plans = find_paths(_caps(), PDF, WORD)
    assert [p.description for p in plans] == [
        "extract → words",
        "pages → ForEach → ocr → words",
        "extract → ocr → words",
    ]
    plan = plans[1]
    assert [s.kind for s in plan.steps] == [
        StepKind.CAP, StepKind.FOR_EACH, StepKind.CAP, StepKind.CAP,
    ]  # fmt: skip
    pages, for_each, ocr, words = plan.steps
    assert (pages.title, pages.input_media.text, pages.output_media.text) == ("pages", PDF, PAGE)
    assert pages.output_is_sequence and not pages.per_item and pages.output_name == "pages"
    assert (
        for_each.cap is None and for_each.input_media.text == PAGE and for_each.title == "ForEach"
    )
    assert ocr.per_item and ocr.input_media.text == "media:image" and ocr.output_name == "text"
    assert words.per_item  # still inside the map: words takes one value
    assert plan.cap_step_count == 3 and plan.total_steps == 4
    assert plan.specificity == sum(s.cap.specificity for s in plan.cap_steps if s.cap)
    assert plan.rank_key == (3, -plan.specificity, tuple(c.text for c in plan.caps))
    # The third plan follows extract's other output: it takes it by name, no main output.
    other = plans[2].steps[0]
    assert other.other_output is not None and other.other_output.text == FIGURE
    assert "(doc=n0) -> edge_0 -> (figures=n1)" in plans[2].to_notation()


def test_the_machine_is_knitted_once_and_kept() -> None:
    (plan, *_) = find_paths(_caps(), PDF, WORD)
    assert plan.machine is plan.machine
    assert plan.to_notation(bracketed=True).startswith("[edge_0 cap:")
    assert [n.media.text for n in plan.machine.inputs] == [PDF]


def test_the_stream_yields_paths_as_found_then_depths_then_the_ranked_summary() -> None:
    events = list(iter_paths(_caps(), PDF, WORD, max_depth=4))
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "DepthComplete",  # depth 1: nothing
        "PathFound", "DepthComplete",  # depth 2: extract → words
        "PathFound", "DepthComplete",  # depth 3: extract (its figures) → ocr → words
        "PathFound", "DepthComplete",  # depth 4: pages → ForEach → ocr → words
        "SearchComplete",
    ]  # fmt: skip
    found = [e for e in events if isinstance(e, PathFound)]
    assert [(e.index, e.depth) for e in found] == [(0, 2), (1, 3), (2, 4)]
    summary = events[-1]
    assert isinstance(summary, SearchComplete) and not summary.limit_reached
    assert summary.total_paths == 3 and summary.depths_searched == 4
    assert [p.description for p in summary.plans][1] == "pages → ForEach → ocr → words"
    assert [e.paths_found for e in events if isinstance(e, DepthComplete)] == [0, 1, 1, 1]


def test_closing_the_stream_stops_the_search() -> None:
    stream = iter_paths(_caps(), PDF, WORD)
    first = next(e for e in stream if isinstance(e, PathFound))
    stream.close()
    assert first.index == 0
    assert list(stream) == []


def test_the_limit_stops_the_gathering_before_ranking() -> None:
    """PLAN-13: with limit 2 the search stops at depth 3; the path of depth 4 is not
    searched."""
    plans = find_paths(_caps(), PDF, WORD, limit=2)
    assert [p.description for p in plans] == ["extract → words", "extract → ocr → words"]
    events = list(iter_paths(_caps(), PDF, WORD, limit=2))
    summary = events[-1]
    assert isinstance(summary, SearchComplete) and summary.limit_reached
    assert summary.depths_searched == 3


def test_the_limit_keeps_the_first_found_at_the_cut_depth_not_the_best() -> None:
    """PLAN-13: two caps reach the target at depth 1; with limit 1 the first in cap order is
    kept even though the other ranks higher."""
    generic = CapDef.simple(f'cap:in="{PDF}";op=dump;out="{TEXT}"', "dump", aliases="dump")
    specific = CapDef.simple(
        f'cap:in="{PDF}";op=dump;out="{TEXT}";fast', "fast dump", aliases="fast"
    )
    assert [p.title for p in (find_paths([generic, specific], PDF, TEXT)[0].steps)] == ["fast dump"]
    assert find_paths([generic, specific], PDF, TEXT, limit=1)[0].steps[0].title == "dump"
    assert find_paths([specific, generic], PDF, TEXT, limit=1)[0].steps[0].title == "fast dump"


def test_a_graph_is_reused_across_queries_and_gives_the_same_answers() -> None:
    graph = CapGraph.from_caps(_caps())
    assert CapGraph.from_caps(graph) is graph
    assert len(graph.edges) == 5  # the identity adds none; extract adds two
    first = find_paths(graph, PDF, WORD)
    assert reachable_targets(graph, PDF)
    assert find_paths(graph, PDF, WORD) == first == find_paths(_caps(), PDF, WORD)


def test_respelled_media_texts_give_the_same_answers() -> None:
    ours = find_paths(_caps(), "MEDIA:ext=pdf;document", "media:word;enc=utf-8")
    assert [p.to_notation() for p in ours] == [p.to_notation() for p in find_paths(
        _caps(), PDF, WORD)]  # fmt: skip
    assert ours[0].source.text == PDF


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_reachable_targets_grow_with_depth(depth: int) -> None:
    found = {t.media_urn.text: t for t in reachable_targets(_caps(), PDF, max_depth=depth)}
    assert found[TEXT].min_path_length == 1
    if depth >= 3:  # pages → ForEach → ocr also reaches text
        assert found[TEXT].path_count == 3
    assert (WORD in found) == (depth >= 2)
