"""The kit judged by its verdicts on known targets: a conformant raw-frame cartridge, the
reference runtime (capdag 1.524.58), and the project's bundled cartridges (the same cartridge
with one deliberate defect at a time is ``test_conformance_defects.py``)."""

from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

import pytest

from cartridge_runtime.conformance import KNOWN_DEFECTS, Report, Status, run_conformance
from cartridge_runtime.testing import check_cartridge

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"
CAPDAG = ROOT / "tests" / "fixtures" / "capdag_cartridge.py"
#: Bundled cartridges certified here: those without a ``tests/cartridges/test_cartridge_<name>.py``
#: of their own (which certifies its cartridge through ``check_cartridge`` already).
BUNDLED = sorted(
    p
    for p in (ROOT / "cartridges").glob("*.py")
    if not (ROOT / "tests" / "cartridges" / f"test_cartridge_{p.stem}.py").exists()
)

#: capdag 1.524.58's defects as the kit sees them on the fixture (identity, a sequence cap,
#: a typed-error cap and a raw-write cap): silent exit 0 on malformed input (FRM-20, FRM-12,
#: and no ERR first: FRM-21), max_chunk kept above a small max_frame (FRM-16), raw write()
#: unwrapped (REQ-14), typed errors flattened to HANDLER_ERROR (ERR-4).
CAPDAG_FAILS = {"FRM-20", "FRM-12", "FRM-21", "FRM-16", "REQ-14", "ERR-4"}


def _failed(report: Report) -> set[str]:
    return {r.id for r in report.results if r.status is Status.FAIL}


def _explain(report: Report) -> str:
    return "\n".join(
        f"{r.id} {r.status}: {r.detail}" for r in report.results if r.status is not Status.PASS
    )


def test_conformant_raw_cartridge_passes_everything() -> None:
    report = check_cartridge(RAW, strict=True, timeout=10)
    assert _failed(report) == set(), _explain(report)
    skipped = {r.id for r in report.results if r.status is Status.SKIP}
    # sequence, LOG and progress all exercised; it has no cap that fails (ERR-4, CLI-6)
    assert skipped == {"ERR-4", "CLI-6"}, _explain(report)


def test_reference_runtime_fails_only_its_known_defects() -> None:
    report = run_conformance(CAPDAG, timeout=15)
    assert _failed(report) == CAPDAG_FAILS, _explain(report)
    for r in report.results:
        if r.status is Status.FAIL:
            assert r.known_defect, f"{r.id} failed without naming the reference defect: {r.detail}"
            assert r.id in KNOWN_DEFECTS
    must = {r.id for r in report.results if r.failed_must}
    assert must == {"FRM-20", "FRM-12", "REQ-14", "ERR-4"}
    statuses = {r.id: r.status for r in report.results}
    assert statuses["REQ-17"] is Status.PASS  # its sequence output reassembles


def test_check_cartridge_raises_listing_failures() -> None:
    with pytest.raises(AssertionError) as info:
        check_cartridge(
            [sys.executable, str(RAW), "--defect", "seq-gap"], only=["TYP-5", "HSK-3"], timeout=8
        )
    text = str(info.value)
    assert "TYP-5" in text and "HSK-3" not in text
    check_cartridge(
        [sys.executable, str(RAW), "--defect", "seq-gap"],
        only=["TYP-5", "HSK-3"],
        expected_failures=["TYP-5"],
        timeout=8,
    )
    with pytest.raises(AssertionError, match="expected to fail"):
        check_cartridge(RAW, only=["HSK-3"], expected_failures=["HSK-3"], timeout=8)


@pytest.fixture(scope="module")
def bundled_reports() -> dict[str, Report]:
    if not BUNDLED:
        pytest.skip("no cartridges/ yet")

    def one(path: Path) -> Report:
        return run_conformance(path, timeout=15, jobs=6)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((p.name for p in BUNDLED), pool.map(one, BUNDLED), strict=True))


@pytest.mark.parametrize("name", [p.name for p in BUNDLED] or ["interop.py"])
def test_bundled_cartridges_pass_every_must_check(
    name: str, bundled_reports: dict[str, Report]
) -> None:
    if name not in bundled_reports:
        pytest.skip(f"cartridges/{name} is not there yet")
    report = bundled_reports[name]
    assert report.ok, _explain(report)
