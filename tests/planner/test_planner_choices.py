"""Plans a user would pick: caps marked not for planning (PLAN-24), plans that need a side
argument (PLAN-25), a depth of zero as the reference answers it (PLAN-21), and "no way" that
says why and what can be made instead (PLAN-22, PLAN-26)."""

from __future__ import annotations

import sys
from typing import Final

import pytest
from _bundled import load_cartridge
from _planner_reference import reference_fab, reference_paths, reference_reachable

from cartridge_runtime.manifest import (
    PLANNABLE_KEY,
    ArgDef,
    CapDef,
    Manifest,
    identity_cap,
)
from cartridge_runtime.planner import (
    KnitError,
    NoPathReason,
    NotFoundError,
    best_path,
    complete_first,
    explain_no_path,
    find_paths,
    reachable_targets,
)

TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
PDF: Final = "media:document;ext=pdf"
JSON: Final = "media:fmt=json"
CSV: Final = "media:fmt=csv;list;record"
MARKDOWN: Final = "media:enc=utf-8;ext=md;markdown"
KEPT: Final = "media:enc=utf-8;kept;word"
NOT_PLANNED: Final = {PLANNABLE_KEY: "false"}


def _extract(**metadata: str) -> CapDef:
    return CapDef.simple(
        f'cap:in="{PDF}";op=extract;out="{TEXT}"', "Extract", aliases="extract",
        input_name="doc", output_name="text", metadata=metadata or None,
    )  # fmt: skip


def _words() -> CapDef:
    return CapDef.simple(
        f'cap:in="{TEXT}";op=words;out="{WORD}"', "Words", aliases="words",
        input_name="text", output_name="words", output_is_sequence=True,
    )  # fmt: skip


def _hash() -> CapDef:
    return CapDef.simple(
        f'cap:in=media:;op=hash;out="{TEXT}"', "Hash", aliases="hash",
        input_name="data", output_name="digest", metadata=NOT_PLANNED,
    )  # fmt: skip


def _query() -> CapDef:
    """A cap with a required side argument (no default), as jsonkit's query."""
    return CapDef.simple(
        f'cap:in="{JSON}";op=query;out="{TEXT}"', "Query", aliases="query",
        input_name="doc", output_name="text",
        extra_args=[ArgDef.flag("media:enc=utf-8;json-path", "--path", name="path",
                                required=True, description="The path")],
    )  # fmt: skip


def _flatten() -> CapDef:
    """A longer way from JSON to text that needs nothing."""
    return CapDef.simple(
        f'cap:in="{JSON}";op=flatten;out="media:enc=utf-8;flat"', "Flatten", aliases="flatten",
        input_name="doc", output_name="flat",
    )  # fmt: skip


def _unflat() -> CapDef:
    return CapDef.simple(
        f'cap:in="media:enc=utf-8;flat";op=lines;out="{TEXT}"', "Lines", aliases="lines",
        input_name="flat", output_name="text",
    )  # fmt: skip


# -- PLAN-24: not for planning ------------------------------------------------------------------


def test_a_cap_marked_not_for_planning_takes_no_part() -> None:
    caps = [identity_cap(), _extract(), _words(), _hash()]
    assert not caps[3].plannable and caps[1].plannable
    plans = find_paths(caps, PDF, WORD)
    assert [plan.description for plan in plans] == ["Extract → Words"]
    assert find_paths(caps, "media:", TEXT) == []
    assert all(t.media_urn.text != TEXT for t in reachable_targets(caps, "media:video"))
    unmarked = [identity_cap(), _extract(), _words(), CapDef.simple(
        f'cap:in=media:;op=hash;out="{TEXT}"', "Hash", aliases="hash",
        input_name="data", output_name="digest")]  # fmt: skip
    assert "Hash → Words" in [plan.description for plan in find_paths(unmarked, PDF, WORD)]


@pytest.mark.parametrize("word", ["false", "False", " no ", "0"])
def test_the_flag_reads_the_usual_words_for_false(word: str) -> None:
    assert not _extract(**{PLANNABLE_KEY: word}).plannable
    assert _extract(**{PLANNABLE_KEY: "true"}).plannable


def test_the_flag_travels_in_metadata_the_reference_keeps_and_ignores() -> None:
    """The reference has no field for it: the flag is cap metadata, which the reference reads,
    writes back unchanged, and does not consult when planning."""
    from capdag.cap.definition import Cap

    manifest = Manifest.build(name="m", version="1.0.0", description="d", caps=[_hash()])
    (data,) = [c for c in manifest.to_json()["cap_groups"][0]["caps"] if "hash" in c["urn"]]
    assert data["metadata"] == NOT_PLANNED
    reference = Cap.from_dict(data)
    assert reference.to_dict()["metadata"] == NOT_PLANNED
    fab, registry = reference_fab([data])
    assert reference_paths(fab, registry, PDF, TEXT, is_sequence=False, max_depth=3, limit=5)
    assert find_paths([_hash()], PDF, TEXT) == []


def _bundled_caps() -> list[CapDef]:
    names = ("text", "jsonkit", "archive", "wordkit", "interop")
    return [cap for name in names for cap in load_cartridge(name).MANIFEST.all_caps()]


def test_the_bundled_test_caps_are_not_planned() -> None:
    caps = _bundled_caps()
    interop = load_cartridge("interop").MANIFEST.all_caps()
    assert all(not cap.plannable for cap in interop if cap.urn != "cap:effect=none" and
               "identity" not in cap.aliases)  # fmt: skip
    wordkit = {cap.aliases[0]: cap.plannable for cap in load_cartridge("wordkit").CAPS}
    for test_cap in ("bang", "slow", "quiet", "flaky", "pair"):
        assert wordkit[test_cap] is False, test_cap
    for user_cap in ("split", "upper", "route", "join", "count"):
        assert wordkit[user_cap] is True, user_cap
    titles = {cap.title for cap in interop}
    for source, target in ((CSV, WORD), (JSON, WORD), (MARKDOWN, KEPT), (TEXT, WORD)):
        for plan in find_paths(caps, source, target):
            used = {step.title for step in plan.cap_steps}
            assert not used & (titles - {"Split"}) or used <= {"Split", "Route", "Upper"}, (
                plan.description
            )
            assert all(step.definition is None or step.definition.plannable
                       for step in plan.steps), plan.description  # fmt: skip
    best = find_paths(caps, MARKDOWN, KEPT)[0]
    assert best.description == "Split → ForEach → Route"


# -- PLAN-21: a depth or limit of zero answers nothing, as the reference ------------------------


@pytest.mark.parametrize("depth", [0, -1])
def test_a_depth_of_zero_or_less_answers_no_paths_as_the_reference(depth: int) -> None:
    caps = [identity_cap(), _extract(), _words()]
    data = [cap.to_json() for cap in caps]
    fab, registry = reference_fab(data)
    assert reference_paths(fab, registry, PDF, WORD, is_sequence=False, max_depth=depth,
                           limit=20) == []  # fmt: skip
    assert reference_reachable(fab, PDF, is_sequence=False, max_depth=depth) == []
    assert find_paths(caps, PDF, WORD, max_depth=depth) == []
    assert reachable_targets(caps, PDF, max_depth=depth) == []
    with pytest.raises(NotFoundError, match="the depth ran out"):
        best_path(caps, PDF, WORD, max_depth=depth)


@pytest.mark.parametrize("limit", [0, -3])
def test_a_limit_of_zero_or_less_answers_no_paths_as_the_reference(limit: int) -> None:
    caps = [identity_cap(), _extract(), _words()]
    fab, registry = reference_fab([cap.to_json() for cap in caps])
    assert reference_paths(fab, registry, PDF, WORD, is_sequence=False, max_depth=5,
                           limit=limit) == []  # fmt: skip
    assert find_paths(caps, PDF, WORD, limit=limit) == []


# -- PLAN-25: plans that need a side argument ---------------------------------------------------


def test_a_plan_with_an_unbound_required_argument_says_what_it_needs() -> None:
    caps = [identity_cap(), _query(), _flatten(), _unflat()]
    plans = find_paths(caps, JSON, TEXT)
    # the reference's order: the shorter plan first, although it needs path
    assert [plan.description for plan in plans] == ["Query", "Flatten → Lines"]
    assert plans[0].needs == ("path",) and plans[0].cap_steps[0].needs == ("path",)
    assert plans[1].needs == ()
    ordered = complete_first(plans)
    assert [plan.description for plan in ordered] == ["Flatten → Lines", "Query"]
    # once the caller binds path, the shorter plan is complete again and stays first
    assert [p.description for p in complete_first(plans, {"path"})] == ["Query", "Flatten → Lines"]


def test_an_optional_or_defaulted_side_argument_is_not_needed() -> None:
    optional = CapDef.simple(
        f'cap:in="{JSON}";op=query;out="{TEXT}"', "Query", aliases="query",
        input_name="doc", output_name="text",
        extra_args=[
            ArgDef.flag("media:enc=utf-8;sep", "--sep", name="sep", required=False),
            ArgDef(media_urn="media:integer", name="n", sources=[], required=True,
                   default_value=3),
        ],
    )  # fmt: skip
    (plan,) = find_paths([optional], JSON, TEXT)
    assert plan.needs == ()


def test_machine_with_binds_side_arguments_as_constants() -> None:
    (plan,) = [p for p in find_paths([_query()], JSON, TEXT)]
    text = plan.machine_with({"path": "$.store"}).to_notation()
    assert 'path="$.store"' in text
    assert "path" not in plan.to_notation()
    with pytest.raises(KnitError, match="no step of this plan takes an argument named nope"):
        plan.machine_with({"nope": "x"})


# -- PLAN-22, PLAN-26: why no way, and what can be made ------------------------------------------


def test_no_way_names_its_reason_and_the_nearest_targets() -> None:
    caps = [identity_cap(), _extract(), _words()]
    no_source = explain_no_path(caps, "media:video", TEXT)
    assert no_source.reason is NoPathReason.NO_CAP_TAKES_SOURCE
    assert no_source.nearest == ()
    no_target = explain_no_path(caps, PDF, "media:word")
    assert no_target.reason is NoPathReason.NO_CAP_GIVES_TARGET
    assert [near.media_urn.text for near in no_target.nearest] == [WORD]
    assert "nearest targets that can be made: media:enc=utf-8;word (2 steps)" in no_target.message
    too_deep = explain_no_path(caps, PDF, WORD, max_depth=1)
    assert too_deep.reason is NoPathReason.DEPTH_RAN_OUT and too_deep.steps_needed == 2
    apart = explain_no_path([*caps, _query()], PDF, JSON + ";x")
    assert apart.reason is NoPathReason.NO_CAP_GIVES_TARGET
    # a word is text too (it conforms to words' in=), but words never gives plain text back
    unreached = explain_no_path([identity_cap(), _extract(), _words(), _query()], WORD, TEXT)
    assert unreached.reason is NoPathReason.NOT_CONNECTED
    cut = explain_no_path([_extract(), _words(), _query()], PDF, TEXT + ";x")
    assert cut.reason is NoPathReason.NO_CAP_GIVES_TARGET
    assert [near.media_urn.text for near in cut.nearest][:1] == [TEXT]


def test_not_connected_when_the_target_exists_elsewhere() -> None:
    caps = [identity_cap(), _extract(), _words(), _flatten(), _unflat()]
    assert find_paths(caps, JSON, "media:enc=utf-8;flat")  # flatten gives it: the type exists
    lonely = explain_no_path(caps, PDF, "media:enc=utf-8;flat")
    assert lonely.reason is NoPathReason.NOT_CONNECTED
    assert f"nothing {PDF} becomes leads to media:enc=utf-8;flat" in lonely.message
    assert [near.media_urn.text for near in lonely.nearest][:1] == [TEXT]


@pytest.mark.asyncio
async def test_an_engine_offers_complete_plans_first() -> None:
    from cartridge_runtime.engine import Engine

    manifest = Manifest.build(
        name="jsontools", version="1.0.0", description="d",
        caps=[_query(), _flatten(), _unflat()],
    )  # fmt: skip
    async with Engine() as engine:
        engine.add_cartridge(sys.executable, name="jsontools", manifest=manifest)
        plans = await engine.plan(JSON, TEXT)
    assert [plan.description for plan in plans] == ["Flatten → Lines", "Query"]
    assert plans[0].needs == () and plans[1].needs == ("path",)
