"""``cartridge plan``: inputs detected, plans listed with their machines, no path and usage
mistakes each one line with their exit status; a warm cache plans without a start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cartridge_runtime.machine import parse_machine
from cartridge_runtime.manifest import Manifest

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "cartridges" / "text.py"
WORDKIT = ROOT / "cartridges" / "wordkit.py"
SAMPLE_MD = ROOT / "cartridges" / "samples" / "sample.md"
SAMPLE_TXT = ROOT / "cartridges" / "samples" / "sample.txt"
WORD = "media:enc=utf-8;word"


def cartridge(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    home = Path(tempfile.mkdtemp(prefix="cartridge-home-"))  # caches and run records
    env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"), CARTRIDGE_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_the_plans_are_listed_with_their_machines() -> None:
    out = cartridge("plan", str(SAMPLE_MD), "--to", WORD, "-c", str(TEXT), "-c", str(WORDKIT))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"from media:enc=utf-8;ext=md;markdown to {WORD}"
    assert lines[1].split("\t") == ["1", "split", "wordkit"]
    assert "outline → ForEach → split (per item)\ttext, wordkit" in out.stdout
    assert "machine 1:" in out.stdout and 'op=split;out="media:enc=utf-8;word"' in out.stdout


def test_json_carries_each_plan_and_its_machine_resolves(tmp_path: Path) -> None:
    out = cartridge(
        "plan", str(SAMPLE_MD), "--to", WORD, "-c", str(TEXT), "-c", str(WORDKIT), "--json"
    )
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["source"] == "media:enc=utf-8;ext=md;markdown"
    assert document["is_sequence"] is False
    plans = document["plans"]
    assert [p["rank"] for p in plans] == list(range(1, len(plans) + 1))
    second = plans[1]
    assert [s.get("alias") for s in second["steps"]] == ["outline", None, "split"]
    assert [s.get("per_item") for s in second["steps"] if "alias" in s] == [False, True]
    manifests = [
        Manifest.from_json(
            subprocess.run(
                [sys.executable, str(path), "manifest"], capture_output=True, check=True
            ).stdout
        )
        for path in (TEXT, WORDKIT)
    ]
    caps = [cap for m in manifests for cap in m.all_caps()]
    for plan in plans:
        machine = parse_machine(plan["machine"], caps)
        assert machine.to_notation() == plan["machine"]


def test_no_path_says_why_and_exit_1(tmp_path: Path) -> None:
    out = cartridge("plan", "media:pdf", "--to", WORD, "-c", str(WORDKIT))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"error: no way from media:pdf to {WORD} over these cartridges (searched 10 steps "
        "deep): no cap takes media:pdf"
    ]


def test_usage_mistakes_start_nothing(tmp_path: Path) -> None:
    cases = [
        (["plan", str(SAMPLE_MD), "--to", WORD], "--cartridge PATH or --from-dir ROOT"),
        (["plan", str(SAMPLE_MD), "--to", WORD, "-c", str(tmp_path)], "is a directory"),
        (["plan", str(SAMPLE_MD), "--to", WORD, "-c", "nope.py"], "not found"),
        (["plan", str(tmp_path / "gone.md"), "--to", WORD, "-c", str(WORDKIT)], "gone.md"),
        (["plan", str(SAMPLE_MD), "--to", "not-a-urn", "-c", str(WORDKIT)], "not-a-urn"),
    ]
    for args, words in cases:
        out = cartridge(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith("error: ") and words in line, (args, line)


def test_a_warm_cache_plans_without_starting_a_cartridge(tmp_path: Path) -> None:
    installed = tmp_path / "installed"
    installed.mkdir()
    for path in (TEXT, WORDKIT):
        shutil.copy(path, installed / path.name)
    args = ["plan", str(SAMPLE_MD), "--to", WORD, "--from-dir", str(installed), "--json"]
    args += ["--cache", str(tmp_path / "cache")]
    cold = json.loads(cartridge(*args).stdout)
    warm = cartridge(*args)
    assert warm.returncode == 0, warm.stderr
    document = json.loads(warm.stdout)
    assert document["cartridges_started"] == 0
    assert [p["machine"] for p in document["plans"]] == [p["machine"] for p in cold["plans"]]
    assert document["plans"][0]["steps"][0]["cartridge"] == "wordkit"


KEPT = "media:enc=utf-8;kept;word"


def test_run_to_plans_shows_the_machine_and_runs_it(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("tiny elephants ox giraffes\n")
    args = ["run", "--to", KEPT, str(doc), "-c", str(WORDKIT), "--runs-dir", str(tmp_path / "r")]
    out = cartridge(*args)
    assert out.returncode == 0, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("plan 1 of ") and first.endswith(": Split → ForEach → Route")
    assert 'op=route;out="media:enc=utf-8;kept;word"' in out.stderr
    kept = out.stdout.split()
    assert kept and set(kept) <= {"tiny", "elephants", "ox", "giraffes"}
    records = list((tmp_path / "r").glob("*/machine.txt"))
    assert len(records) == 1 and "op=route" in records[0].read_text()


def test_run_to_dry_run_prints_the_machine_and_runs_nothing(tmp_path: Path) -> None:
    out = cartridge("run", "--to", KEPT, str(SAMPLE_MD), "-c", str(WORDKIT), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "(word=n1) -> edge_1 -> (kept=n2)"
    assert out.stdout.count("edge_") == 4


def test_run_to_refusals(tmp_path: Path) -> None:
    for name in ("a.md", "b.md"):
        shutil.copy(SAMPLE_MD, tmp_path / name)
    cases = [
        (["run", "--to", "media:pdf", str(SAMPLE_MD), "-c", str(WORDKIT)], 1, "no way from"),
        (["run", "--to", KEPT, str(SAMPLE_MD), "-c", str(WORDKIT), "--pick", "99"], 2, "--pick"),
        (
            ["run", "--to", KEPT, str(SAMPLE_MD), str(SAMPLE_TXT), "-c", str(WORDKIT)],
            2,
            "mixed types (1 md, 1 txt)",
        ),
        (["run", "--to", KEPT, str(tmp_path / "*.md"), "-c", str(WORDKIT)], 2, "give --output-dir"),
        (["run", "--to", KEPT, str(tmp_path / "nope.md"), "-c", str(WORDKIT)], 2, "nope.md"),
        (["run", str(SAMPLE_MD), str(SAMPLE_MD), "-c", str(WORDKIT)], 2, "one machine FILE"),
    ]
    for args, code, words in cases:
        out = cartridge(*args)
        assert out.returncode == code, (args, out.stderr)
        line = out.stderr.strip().splitlines()[-1]
        assert line.startswith("error: ") and words in line, (args, line)
