"""Refusals: each a PlannerError whose kind is the reference's class name, one readable line."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef, identity_cap
from cartridge_runtime.planner import (
    MAX_SEARCH_DEPTH,
    CapGraph,
    InvalidInputError,
    InvalidMediaError,
    KnitError,
    NotFoundError,
    PlannerError,
    best_path,
    find_paths,
    iter_paths,
    reachable_targets,
)

TEXT = "media:enc=utf-8"
WORD = "media:enc=utf-8;word"
PDF = "media:document;ext=pdf"
CAPS = [
    identity_cap(),
    CapDef.simple(
        f'cap:in="{PDF}";op=extract;out="{TEXT}"',
        "extract",
        aliases="extract",
        input_name="doc",
        output_name="text",
    ),
    CapDef.simple(
        f'cap:in="{TEXT}";op=words;out="{WORD}"',
        "words",
        aliases="words",
        input_name="text",
        output_name="words",
        output_is_sequence=True,
    ),
]


@pytest.mark.parametrize(
    ("source", "target", "kind"),
    [
        ("", TEXT, "EmptyError"),
        (" media:a", TEXT, "WhitespaceInInputError"),
        ("document", TEXT, "MissingPrefixError"),
        (":a", TEXT, "EmptyPrefixError"),
        ("media:a#", TEXT, "InvalidCharacterError"),
        ('media:a="x', TEXT, "UnterminatedQuoteError"),
        ("media:a;a", TEXT, "DuplicateKeyError"),
        ("media:12", TEXT, "NumericKeyError"),
        ("cap:in=media:a", TEXT, "MediaUrnError"),
        ("media:void;x", TEXT, "MediaUrnError"),
        (PDF, "media:a;a", "DuplicateKeyError"),
        (" bad", "also bad;", "WhitespaceInInputError"),  # the source is read first
    ],
)
def test_a_media_text_that_does_not_parse_is_refused_by_its_urn_class(
    source: str, target: str, kind: str
) -> None:
    with pytest.raises(InvalidMediaError) as refused:
        find_paths(CAPS, source, target)
    assert refused.value.kind == kind
    assert isinstance(refused.value, PlannerError) and isinstance(refused.value, ValueError)
    assert "\n" not in str(refused.value)
    with pytest.raises(InvalidMediaError):
        iter_paths(CAPS, source, target)  # refused at the call, before any event


def test_a_source_that_does_not_parse_is_refused_by_reachable_targets_too() -> None:
    with pytest.raises(InvalidMediaError) as refused:
        reachable_targets(CAPS, "media:a;k=")
    assert refused.value.kind == "EmptyTagComponentError"


def test_a_media_value_that_is_not_text_is_refused() -> None:
    with pytest.raises(InvalidMediaError) as refused:
        find_paths(CAPS, 42, TEXT)  # type: ignore[arg-type]
    assert refused.value.kind == "MediaUrnError"


@pytest.mark.parametrize("depth", [True, 2.0, "3", MAX_SEARCH_DEPTH + 1])
def test_a_bad_depth_is_refused(depth: Any) -> None:
    for call in (
        lambda: find_paths(CAPS, PDF, WORD, max_depth=depth),
        lambda: reachable_targets(CAPS, PDF, max_depth=depth),
        lambda: best_path(CAPS, PDF, WORD, max_depth=depth),
    ):
        with pytest.raises(InvalidInputError) as refused:
            call()
        assert refused.value.kind == "InvalidInputError"
        assert "max_depth" in str(refused.value)


@pytest.mark.parametrize("limit", [False, 1.5, "2"])
def test_a_bad_limit_is_refused(limit: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        find_paths(CAPS, PDF, WORD, limit=limit)


def test_no_path_is_an_empty_list_and_best_path_says_why() -> None:
    assert find_paths(CAPS, PDF, "media:enc=utf-8;summary") == []
    with pytest.raises(NotFoundError) as refused:
        best_path(CAPS, PDF, "media:enc=utf-8;summary")
    assert refused.value.kind == "NotFoundError"
    assert "no cap gives exactly media:enc=utf-8;summary" in str(refused.value)
    # a refinement of what a cap gives is not reached either: the target matches exactly
    assert find_paths(CAPS, PDF, "media:enc=utf-8;lang=en") == []


def test_an_unknown_source_reaches_nothing_and_best_path_says_no_cap_takes_it() -> None:
    assert find_paths(CAPS, "media:video", TEXT) == []
    assert reachable_targets(CAPS, "media:video") == []
    with pytest.raises(NotFoundError, match="no cap takes media:video"):
        best_path(CAPS, "media:video", TEXT)


def test_a_depth_too_small_is_named_by_best_path() -> None:
    assert best_path(CAPS, PDF, WORD, max_depth=2).description == "extract → words"
    with pytest.raises(NotFoundError, match="a path needs at least 2 steps, 1 were searched"):
        best_path(CAPS, PDF, WORD, max_depth=1)


def test_a_cap_taking_data_with_no_main_input_is_refused() -> None:
    odd = CapDef(
        urn=f'cap:in="{TEXT}";op=odd;out="{TEXT}"',
        title="odd",
        aliases=("odd",),
        args=(ArgDef.flag(TEXT, "--text", name="text", required=True),),
        outputs=(OutputDef(media_urn=TEXT, name="text", output_description="text"),),
    )
    with pytest.raises(InvalidInputError, match="declares no main input") as refused:
        CapGraph.from_caps([*CAPS, odd])
    assert refused.value.kind == "InvalidInputError"


def test_caps_that_are_not_cap_definitions_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="CapDef"):
        find_paths(["cap:op=x"], PDF, TEXT)  # type: ignore[list-item]


def test_a_manifest_stands_for_its_caps() -> None:
    manifest = Manifest.build(name="t", version="1.0.0", description="t", caps=CAPS[1:])
    assert [p.to_notation() for p in find_paths(manifest, PDF, WORD)] == [
        p.to_notation() for p in find_paths(CAPS, PDF, WORD)
    ]


def test_a_plan_from_a_generator_is_found_but_cannot_be_knitted() -> None:
    make = CapDef.simple(f'cap:in=media:void;op=make;out="{TEXT}"', "make", aliases="make")
    (plan,) = find_paths([*CAPS, make], "media:void", TEXT)
    assert plan.description == "make" and not plan.knittable
    with pytest.raises(KnitError) as refused:
        plan.to_notation()
    assert refused.value.kind == "UnmatchedSourceInCapArgsError"


def test_errors_pickle_with_their_kind() -> None:
    error = InvalidMediaError("the source 'x' is not a media URN", kind="MissingPrefixError")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is InvalidMediaError and back.kind == "MissingPrefixError"
    assert str(back) == str(error) == "the source 'x' is not a media URN [PLAN-20]"
