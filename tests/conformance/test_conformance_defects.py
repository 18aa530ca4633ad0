"""The kit judged by its verdicts on the conformant raw-frame cartridge with one deliberate
defect at a time: each fails exactly the checks its defect breaks (a file of its own, so that
its long fixture runs beside the other targets)."""

from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

import pytest

from cartridge_runtime.conformance import Report, Status, run_conformance

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"

#: defect switch of the raw cartridge -> the exact set of checks it must fail.
DEFECTS: dict[str, set[str]] = {
    "bad-checksum": {"REQ-11"},
    "seq-gap": {"TYP-5"},
    "no-identity-cap": {"HSK-8"},
    "wrong-version": {"HSK-4"},
    "silent-heartbeat": {"FLW-12"},  # FLW-13 has no reply to inspect: skipped
    "chunk-count": {"REQ-10"},
    "oversize-chunk": {"FRM-15"},
    "xid-dropped": {"REQ-5"},
    "unwrapped": {"REQ-14"},
    "bad-class": {"ERR-1"},
    # a silent exit 0 on malformed input breaks all three malformed-input checks
    "exit0-malformed": {"FRM-20", "FRM-12", "FRM-21"},
    "hang-eof": {"FRM-23"},
    "ignore-desired-capacities": {"FLW-14"},
    "close-stream-cancels": {"FLW-22"},
    "unsorted-pools": {"HSK-24"},
    # the byte-form SHOULD rules, each judged by re-encoding every received frame
    "non-canonical-encoding": {"FRM-17"},
    "short-floats": {"FRM-18"},
    "meta-order": {"FRM-19"},
    # cap text compared with the manifest's instead of dispatch by meaning
    "exact-text-dispatch": {"URN-18"},
    "help-on-stdout": {"CLI-3", "CLI-4"},
    "compact-manifest": {"MAN-1"},
}

#: defects whose broken rule is a SHOULD: the run still counts as conformant.
SHOULD_ONLY = {
    "unsorted-pools",
    "non-canonical-encoding",
    "short-floats",
    "meta-order",
    "compact-manifest",
}


def _failed(report: Report) -> set[str]:
    return {r.id for r in report.results if r.status is Status.FAIL}


def _explain(report: Report) -> str:
    return "\n".join(
        f"{r.id} {r.status}: {r.detail}" for r in report.results if r.status is not Status.PASS
    )


@pytest.fixture(scope="module")
def defect_reports() -> dict[str, Report]:
    """Every defect run, three at a time (each is a full catalogue run)."""

    def one(name: str) -> Report:
        return run_conformance([sys.executable, str(RAW), "--defect", name], timeout=10, jobs=6)

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(DEFECTS, pool.map(one, DEFECTS), strict=True))


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_fails_exactly_its_check(
    defect: str, defect_reports: dict[str, Report]
) -> None:
    report = defect_reports[defect]
    assert _failed(report) == DEFECTS[defect], _explain(report)
    assert report.ok is (defect in SHOULD_ONLY)
