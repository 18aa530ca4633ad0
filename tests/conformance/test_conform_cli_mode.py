"""The kit's CLI-mode checks (CK-45 to CK-47): help on stderr, unknown aliases, and a failing
handler's one JSON line, compared with the ERR the same cap sent in frame mode."""

from __future__ import annotations

import sys
from pathlib import Path

from cartridge_runtime.conformance import Level, Status, run_conformance

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"
INTEROP = ROOT / "cartridges" / "interop.py"
CAPDAG = ROOT / "tests" / "fixtures" / "capdag_cartridge.py"
CLI_CHECKS = ["CLI-3", "CLI-4", "CLI-5", "CLI-6"]


def _results(target: list[str]) -> dict[str, tuple[Status, Level, str]]:
    report = run_conformance(target, only=CLI_CHECKS)
    return {r.id: (r.status, r.level, r.detail) for r in report.results}


def test_this_runtime_and_the_reference_pass_the_cli_checks() -> None:
    for target in (INTEROP, CAPDAG):
        for rule, (status, _, detail) in _results([sys.executable, str(target)]).items():
            assert status is Status.PASS, (target.name, rule, detail)


def test_help_on_stdout_fails_cli_3_and_cli_4() -> None:
    results = _results([sys.executable, str(RAW), "--defect", "help-on-stdout"])
    assert results["CLI-3"][0] is Status.FAIL and results["CLI-3"][1] is Level.MUST
    assert "on stdout" in results["CLI-3"][2]
    assert results["CLI-4"][0] is Status.FAIL and results["CLI-4"][1] is Level.SHOULD
    assert results["CLI-5"][0] is Status.PASS


WORDS_NOT_JSON = f"""
import os, sys
if sys.argv[1:2] == ["fail"]:
    sys.stderr.write("INTEROP_FAIL (input): asked to fail\\n")
    sys.exit(1)
os.execv(sys.executable, [sys.executable, {str(INTEROP)!r}, *sys.argv[1:]])
"""


def test_a_failure_in_words_instead_of_json_fails_cli_6(tmp_path: Path) -> None:
    wrapper = tmp_path / "words.py"
    wrapper.write_text(WORDS_NOT_JSON)
    results = _results([sys.executable, str(wrapper)])
    status, level, detail = results["CLI-6"]
    assert status is Status.FAIL and level is Level.MUST
    assert "0 JSON lines" in detail and "INTEROP_FAIL (input)" in detail
