"""The conformance kit's catalogue, reports, CLI and capture decoding (no full runs here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from cartridge_runtime.conformance import (
    CATALOGUE,
    KNOWN_DEFECTS,
    Level,
    run_conformance,
    select_checks,
)
from cartridge_runtime.conformance._trace import C2H, H2C, read_capture, vector_line

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"
CAPDAG = ROOT / "tests" / "fixtures" / "capdag_cartridge.py"
RULES = {r["id"]: r for r in json.loads((ROOT / "protocol_spec" / "rules.json").read_text())}
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def test_every_check_id_is_a_rule_id_with_the_same_level() -> None:
    for c in CATALOGUE:
        assert c.id in RULES, f"check {c.id} has no rule in protocol_spec/rules.json"
        assert str(c.level) == RULES[c.id]["level"], c.id
        for rule in c.rules:
            assert rule in RULES, f"check {c.id} cites unknown rule {rule}"


def test_catalogue_ids_are_unique_and_cover_the_issue() -> None:
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids))
    # one check per item of the kit's required coverage
    coverage = """HSK-2 HSK-3 HSK-5 HSK-4 HSK-8 HSK-9 HSK-14 REQ-16 HSK-19 HSK-20 REQ-4 TYP-5 REQ-5
        REQ-11 REQ-9 REQ-10 FRM-15 FRM-14 REQ-14 REQ-17 REQ-29 REQ-30 ERR-1 REQ-31 REQ-33 REQ-34
        FLW-12 FLW-2 FLW-6 FLW-7 FLW-18 FRM-20 FRM-12 REQ-12 HSK-11 TYP-10 FRM-23 CLI-2
        FLW-11 FLW-14 FLW-22 HSK-24 FRM-17 FRM-18 FRM-19"""
    for rule in coverage.split():
        assert rule in ids, rule
    assert set(KNOWN_DEFECTS) <= set(ids)


def test_select_checks_accepts_comma_lists_and_refuses_unknown_ids() -> None:
    assert [c.id for c in select_checks(["hsk-3,HSK-4", "FRM-20"])] == ["HSK-3", "HSK-4", "FRM-20"]
    with pytest.raises(ValueError, match="NOPE-1"):
        select_checks(["NOPE-1"])


def test_report_json_and_junit(tmp_path: Path) -> None:
    report = run_conformance(RAW, only=["HSK-3", "HSK-4", "ERR-4"], timeout=10)
    assert [r.id for r in report.results] == ["HSK-3", "HSK-4", "ERR-4"]
    assert report.summary() == "2 passed, 0 failed, 1 skipped"
    assert report.ok
    report.write_json(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["ok"] is True and data["results"][2]["result"] == "skip"
    report.write_junit(tmp_path / "r.xml")
    suite = ET.parse(tmp_path / "r.xml").getroot()
    assert suite.get("tests") == "3" and suite.get("skipped") == "1"


def test_cli_conform_exit_status_follows_must_checks(tmp_path: Path) -> None:
    ok = subprocess.run(
        [*CLI, "conform", str(RAW), "--only", "HSK-3,FRM-20", "--json", str(tmp_path / "a.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().splitlines()[-1] == "2 passed, 0 failed, 0 skipped"
    assert "FRM-20" in ok.stdout
    bad = subprocess.run(
        [*CLI, "conform", str(CAPDAG), "--only", "FRM-20", "--junit", str(tmp_path / "b.xml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert bad.stdout.strip().splitlines()[-1] == "0 passed, 1 failed, 0 skipped"
    assert "known defect" in bad.stdout
    assert ET.parse(tmp_path / "b.xml").getroot().get("failures") == "1"
    unknown = subprocess.run(
        [*CLI, "conform", str(RAW), "--only", "XYZ-9"], capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2


def test_should_failure_does_not_fail_the_run() -> None:
    report = run_conformance(CAPDAG, only=["FRM-21"], timeout=15)
    (r,) = report.results
    assert r.status == "fail" and r.level is Level.SHOULD and r.known_defect
    assert report.ok


def _vector_lines() -> list[dict[str, object]]:
    out = []
    for path in sorted((ROOT / "protocol_spec" / "vectors" / "frames").glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def test_trace_jsonl_reproduces_the_recorded_vectors() -> None:
    """Every complete frame of the reference vectors decodes to its recorded line
    (type, phase, frame_len, hex, decoded, payload_cbor), session by session."""
    checked = 0
    for path in sorted((ROOT / "protocol_spec" / "vectors" / "frames").glob("*.jsonl")):
        state: dict[str, object] = {}
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("hex_truncated"):
                continue
            (frame,) = read_capture(bytes.fromhex(rec["hex"]), rec["dir"])
            got = vector_line(frame, state)
            for key in ("type", "phase", "frame_len", "hex", "decoded", "payload_cbor"):
                assert got.get(key) == rec.get(key), (path.name, key)
            checked += 1
    assert checked > 500


def test_read_capture_reports_a_truncated_tail() -> None:
    rec = next(r for r in _vector_lines() if r["type"] == "HELLO")
    raw = bytes.fromhex(str(rec["hex"]))
    frames = list(read_capture(raw + raw[:7], H2C))
    assert frames[0].frame is not None and frames[0].error is None
    assert frames[1].frame is None and "trailing" in (frames[1].error or "")
    assert C2H != H2C


def test_a_silent_target_fails_each_check_and_the_run_ends() -> None:
    silent = [sys.executable, "-c", "import time; time.sleep(120)"]
    report = run_conformance(silent, only=["HSK-3", "HSK-14", "FLW-12", "FRM-23"], timeout=1.5)
    assert [r.status for r in report.results] == ["fail"] * 4
    assert all("HELLO" in r.detail for r in report.results), [r.detail for r in report.results]


def test_unrunnable_targets_are_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_conformance(tmp_path / "missing.py")
    with pytest.raises(FileNotFoundError):
        run_conformance("no-such-cartridge-binary-x")
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        run_conformance(str(plain))
