"""``cartridge machine check`` and ``cartridge machine show`` through a real subprocess, over
the bundled wordkit cartridge and its sample machines."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Final

import pytest

from cartridge_runtime.machine import FileMachineSource, Machine, parse_machine
from cartridge_runtime.manifest import CapDef, Manifest

ROOT: Final = Path(__file__).resolve().parents[2]
WORDKIT: Final = ROOT / "cartridges" / "wordkit.py"
MACHINES: Final = ROOT / "cartridges" / "samples" / "machines"
CLI: Final = [sys.executable, "-m", "cartridge_runtime.cli", "machine"]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@cache
def wordkit_caps() -> tuple[CapDef, ...]:
    out = subprocess.run(
        [sys.executable, str(WORDKIT), "manifest"], capture_output=True, timeout=30, check=True
    )
    return tuple(Manifest.from_json(out.stdout).all_caps())


def expected(path: Path) -> Machine:
    return parse_machine(
        path.read_text(),
        wordkit_caps(),
        source=FileMachineSource(path.parent),
        origin=str(path.resolve()),
    )


def test_check_prints_the_canonical_form_and_the_steps() -> None:
    path = MACHINES / "route.machine"
    out = run("check", path, "--cartridge", WORDKIT)
    assert out.returncode == 0, out.stderr
    canonical = expected(path).to_notation()
    assert out.stdout.startswith(canonical + "\n")
    rows = {line.split("│")[1].strip(): line for line in out.stdout.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert set(rows) == {"split", "route", "upper", "join", "count"}
    assert "│ yes " in rows["upper"] and "│ no " in rows["split"]
    assert "word=long" in rows["upper"] and "upper=loud" in rows["upper"]
    assert 'sep=", "' in rows["join"] and "min_length=5" in rows["route"]
    assert 'op=route;out="media:enc=utf-8;kept;word"' in rows["route"]


@pytest.mark.parametrize("name", ["chain", "route", "shout"])
def test_check_json(name: str) -> None:
    path = MACHINES / f"{name}.machine"
    out = run("check", path, "-c", WORDKIT, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"ok": True, "notation": expected(path).to_notation()}


def test_a_refused_machine(tmp_path: Path) -> None:
    path = tmp_path / "bad.machine"
    path.write_text(
        'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
        "doc -> split -> (nope=w)\n"
    )
    out = run("check", path, "-c", WORDKIT)
    assert out.returncode == 1
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("UnknownOutputNameError: statement 2, line 2, column 1: ")
    assert "'nope'" in line and line.endswith("[MCH-6]")
    out = run("check", path, "-c", WORDKIT, "--json")
    assert out.returncode == 1
    answer = json.loads(out.stdout)
    assert answer.pop("message").startswith("cap 'cap:in=")
    assert answer == {"ok": False, "kind": "UnknownOutputNameError", "line": 2, "column": 1}
    out = run("show", path, "-c", WORDKIT)
    assert out.returncode == 1 and "UnknownOutputNameError" in out.stderr


def test_a_syntax_error_in_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.machine"
    path.write_text("doc -> split ->\n")
    out = run("check", path, "--json")
    assert out.returncode == 1
    answer = json.loads(out.stdout)
    assert (answer["ok"], answer["kind"], answer["line"], answer["column"]) == (
        False, "ParseError", 1, 16)  # fmt: skip


def test_a_cap_no_cartridge_declares() -> None:
    # Without the cartridge, the caps the machine names are unknown.
    out = run("check", MACHINES / "chain.machine", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["kind"] == "UnknownCapError"


def test_includes_resolve_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "shout.machine").write_text((MACHINES / "shout.machine").read_text())
    main = tmp_path / "main.machine"
    main.write_text('loud machine "lib/shout.machine"\n(doc=text) -> loud -> (shouted=out)\n')
    out = run("check", main, "-c", WORDKIT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(expected(main).to_notation() + "\n")
    assert "(in loud#1)" in out.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["check", "missing.machine", "-c", str(WORDKIT)], "no such machine file"),
        (["show", "missing.machine"], "no such machine file"),
        (["check", str(MACHINES / "chain.machine"), "-c", "nowhere/x.py"], "nowhere/x.py"),
        (["check", str(MACHINES / "chain.machine"), "-c", "no-such-command-here"], "no such"),
    ],
)
def test_usage_errors(args: list[str], says: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: ") and says in line
    assert "Traceback" not in out.stderr


def test_a_cartridge_that_does_not_start(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nsys.exit(3)\n")
    out = run("check", MACHINES / "chain.machine", "-c", broken)
    assert out.returncode == 2
    assert out.stderr.startswith("error: a cartridge does not start: ")
    assert "Traceback" not in out.stderr


def test_an_unknown_format_is_a_usage_error() -> None:
    out = run("show", MACHINES / "chain.machine", "-c", WORDKIT, "--format", "png")
    assert out.returncode == 2
    assert "png" in out.stderr and "Traceback" not in out.stderr


def test_show_tree() -> None:
    out = run("show", MACHINES / "route.machine", "-c", WORDKIT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "machine (1 strand, 5 steps)"
    assert "strand 0  in: doc  out: long_words, short_count" in lines[1]
    text = out.stdout
    assert "route (per item)" in text and "upper (per item)" in text
    assert "join  cap:" in text and '← sep=", "' in text and "→ text=long_words" in text


@pytest.mark.parametrize(("fmt", "method"), [("mermaid", "to_mermaid"), ("dot", "to_dot")])
def test_show_pictures(fmt: str, method: str) -> None:
    path = MACHINES / "shout.machine"
    out = run("show", path, "-c", WORDKIT, "--format", fmt)
    assert out.returncode == 0, out.stderr
    assert out.stdout == getattr(expected(path), method)().rstrip("\n") + "\n"
    assert out.stdout.startswith("flowchart" if fmt == "mermaid" else "digraph")
