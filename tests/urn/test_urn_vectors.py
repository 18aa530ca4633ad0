"""Every public URN vector (protocol_spec/vectors/urn) against cartridge_runtime.urn.

One parametrized test per vector file; each case is compared field by field
with what the reference (capdag 1.524.58) produced, so any disagreement names
the case and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cartridge_runtime.urn import (
    STANDARD_CAPS,
    CapUrn,
    CapUrnError,
    MediaUrn,
    MediaUrnError,
    UrnError,
    ranking_key,
    select_handler,
)

VECTORS = Path(__file__).resolve().parents[2] / "protocol_spec" / "vectors" / "urn"


def _cases(name: str) -> list[dict[str, Any]]:
    data = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = data["cases"]
    assert len(cases) == data["count"], f"{name}: count field disagrees with the case list"
    return cases


def _params(name: str) -> list[Any]:
    return [pytest.param(c, id=f"{i}") for i, c in enumerate(_cases(name))]


def _reparses_media(text: str) -> bool:
    try:
        return MediaUrn.parse(text).text == text
    except UrnError:
        return False


def _reparses_cap(text: str) -> bool:
    try:
        return CapUrn.parse(text).text == text
    except UrnError:
        return False


@pytest.mark.parametrize("case", _params("parse_media.json"))
def test_parse_media(case: dict[str, Any]) -> None:
    text = case["input"]
    if case["ok"]:
        urn = MediaUrn.parse(text)
        got = {
            "canonical": urn.text,
            "tags": dict(urn.tags),
            "specificity": urn.specificity,
            "canonical_reparses": _reparses_media(urn.text),
        }
        assert str(urn) == urn.text
        assert got == {k: case[k] for k in got}
    else:
        with pytest.raises(UrnError) as info:
            MediaUrn.parse(text)
        assert type(info.value).__name__ == case["error"]
        if isinstance(info.value, MediaUrnError):
            assert info.value.reason == case["reason"]


@pytest.mark.parametrize("case", _params("parse_cap.json"))
def test_parse_cap(case: dict[str, Any]) -> None:
    text = case["input"]
    if case["ok"]:
        cap = CapUrn.parse(text)
        got = {
            "canonical": cap.text,
            "tags": dict(cap.tags),
            "specificity": cap.specificity,
            "in": cap.in_spec.text,
            "out": cap.out_spec.text,
            "effect": cap.effect.value,
            "kind": cap.kind.value,
            "canonical_reparses": _reparses_cap(cap.text),
        }
        assert str(cap) == cap.text
        assert got == {k: case[k] for k in got}
    else:
        with pytest.raises(CapUrnError) as info:
            CapUrn.parse(text)
        err = info.value
        assert case["error"] == "CapUrnError"
        assert err.reason == case["reason"]
        cause = type(err.cause).__name__ if err.cause is not None else None
        assert cause == case.get("cause")


@pytest.mark.parametrize("case", _params("predicates_media.json"))
def test_predicates_media(case: dict[str, Any]) -> None:
    a, b = MediaUrn.parse(case["a"]), MediaUrn.parse(case["b"])
    got = {
        "equivalent": a.is_equivalent(b),
        "a_conforms_to_b": a.conforms_to(b),
        "b_conforms_to_a": b.conforms_to(a),
        "comparable": a.is_comparable(b),
        "meets": a.meets(b),
        "a_satisfies_b": a.satisfies(b),
        "b_satisfies_a": b.satisfies(a),
        "a_may_satisfy_b": a.may_satisfy(b),
        "b_may_satisfy_a": b.may_satisfy(a),
        "a_specificity": a.specificity,
        "b_specificity": b.specificity,
    }
    assert got == {k: case[k] for k in got}
    # The documented mirror readings and symmetries.
    assert b.accepts(a) == case["a_conforms_to_b"]
    assert a.accepts(b) == case["b_conforms_to_a"]
    assert b.is_equivalent(a) == case["equivalent"]
    assert b.meets(a) == case["meets"]


@pytest.mark.parametrize("case", _params("dispatch_cap.json"))
def test_dispatch_cap(case: dict[str, Any]) -> None:
    reg, req = CapUrn.parse(case["registered"]), CapUrn.parse(case["request"])
    got = {
        "dispatchable": reg.is_dispatchable(req),
        "may_dispatch": reg.may_dispatch(req),
        "registered_accepts_request": reg.accepts(req),
        "request_accepts_registered": req.accepts(reg),
        "equivalent": reg.is_equivalent(req),
        "comparable": reg.is_comparable(req),
        "registered_flows_into_request": reg.flows_into(req),
        "registered_specificity": reg.specificity,
        "request_specificity": req.specificity,
        "ranking_key": list(ranking_key(reg, req)),
    }
    assert got == {k: case[k] for k in got}
    assert req.conforms_to(reg) == case["registered_accepts_request"]


_STANDARD_NAMES = ("identity", "discard", "adapter_selection")


@pytest.mark.parametrize("case", _params("ranking.json"))
def test_ranking(case: dict[str, Any]) -> None:
    registered: list[str] = case["registered"]
    request: str = case["request"]
    req = CapUrn.parse(request)
    caps = [CapUrn.parse(r) for r in registered]
    assert [c.is_dispatchable(req) for c in caps] == case["dispatchable"]
    assert [c.specificity for c in caps] == case["specificity"]
    assert req.specificity == case["request_specificity"]
    assert (request in registered) == case["exact_string_match"]

    assert select_handler(registered, request) == case["expected"]
    # The model's selection ignores the exact-text shortcut: feed parsed values
    # whose canonical text differs from the request text only when it matched.
    assert select_handler(caps, req) == _formal_or_exact(case, caps, req)

    with_std = select_handler([*STANDARD_CAPS, *registered], request)
    if with_std is not None and with_std < len(STANDARD_CAPS):
        assert _STANDARD_NAMES[with_std] == case["expected_with_standard_caps"]
    else:
        expected = case["expected_with_standard_caps"]
        assert (None if with_std is None else with_std - len(STANDARD_CAPS)) == expected


def _formal_or_exact(case: dict[str, Any], caps: list[CapUrn], req: CapUrn) -> int | None:
    """With parsed values the shortcut fires on equal canonical text; otherwise
    the answer is the vector's formal selection."""
    texts = [c.text for c in caps]
    if req.text in texts:
        # Dict semantics: the last registration of a text owns its slot.
        return len(texts) - 1 - texts[::-1].index(req.text)
    formal: int | None = case["formal_select"]
    return formal


def test_every_vector_file_is_covered() -> None:
    covered = {
        "parse_media.json",
        "parse_cap.json",
        "predicates_media.json",
        "dispatch_cap.json",
        "ranking.json",
    }
    assert {p.name for p in VECTORS.glob("*.json")} == covered
