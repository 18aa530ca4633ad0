"""The kit sends each cap as written, in canonical form, with its tags reordered and as a
less specific request (URN-18): a cartridge that compares cap text fails, one that
dispatches by chapter 7 passes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cartridge_runtime.conformance import Level, Status, run_conformance
from cartridge_runtime.conformance._checks_dispatch import request_spellings
from cartridge_runtime.urn import CapUrn

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"
CAPDAG = ROOT / "tests" / "fixtures" / "capdag_cartridge.py"


@pytest.mark.parametrize(
    "text",
    [
        "cap:effect=none",
        'cap:in="media:enc=utf-8";out="media:enc=utf-8";chatty',
        'cap:in="media:";out="media:adapter-selection;fmt=json;record"',
        "cap:out=media:void",
        "cap:op=only-tags",
    ],
)
def test_spellings_name_the_cap_or_a_request_it_serves(text: str) -> None:
    cap = CapUrn.parse(text)
    spellings = dict((how, s) for how, s in request_spellings(text))
    assert spellings["as written"] == text
    assert "tags reordered" in spellings and "less specific" in spellings
    assert len(set(spellings.values())) == len(spellings)
    for how, spelling in spellings.items():
        request = CapUrn.parse(spelling)
        if how == "less specific":
            assert cap.is_dispatchable(request) and not request.is_equivalent(cap)
        else:
            assert request.is_equivalent(cap), how
    assert spellings["tags reordered"] != str(cap)


def test_an_unparsable_cap_has_only_its_own_spelling() -> None:
    assert request_spellings("cap:in=media:;out=media:") == [
        ("as written", "cap:in=media:;out=media:")
    ]


def test_a_cartridge_matching_cap_text_exactly_fails_the_must_check() -> None:
    report = run_conformance(
        [sys.executable, str(RAW), "--defect", "exact-text-dispatch"], only=["URN-18"]
    )
    (result,) = report.results
    assert result.status is Status.FAIL and result.level is Level.MUST
    assert "NO_HANDLER" in result.detail and "'cap:effect=none'" in result.detail
    assert not report.ok


@pytest.mark.parametrize(
    "target",
    [RAW, CAPDAG, ROOT / "cartridges" / "interop.py"],
    ids=["raw", "capdag", "runtime"],
)
def test_cartridges_that_dispatch_by_meaning_pass(target: Path) -> None:
    report = run_conformance([sys.executable, str(target)], only=["URN-18"])
    (result,) = report.results
    assert result.status is Status.PASS, result.detail
