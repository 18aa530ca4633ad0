"""``cartridge run``: a machine from the shell, its outputs written atomically, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORDKIT = str(ROOT / "cartridges" / "wordkit.py")
MACHINES = ROOT / "cartridges" / "samples" / "machines"


def cartridge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_outputs_go_to_the_output_folder_with_nothing_else_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = cartridge("run", str(MACHINES / "route.machine"), "-c", WORDKIT,
                     "-i", "doc=tiny elephants ox giraffes", "--output-dir", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["long_words", "short_count"]
    assert (out / "long_words").read_text() == "ELEPHANTS, GIRAFFES"
    assert (out / "short_count").read_text() == "2"
    assert "route" in done.stderr and "skipped" in done.stderr  # the summary table


def test_a_single_output_goes_to_stdout_and_a_file_input_is_read(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("one two")
    done = cartridge("run", str(MACHINES / "shout.machine"), "-c", WORDKIT, "-i", f"doc=@{doc}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ONE TWO"


def test_json_reports_outputs_and_steps() -> None:
    done = cartridge("run", str(MACHINES / "chain.machine"), "-c", WORDKIT, "-i", "doc=a b",
                     "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["outputs"]["text"] == {"text": "a | b"}
    assert report["steps"]["split"]["calls"] == 1


def test_a_failing_step_is_one_line_exit_1_and_leaves_no_file(tmp_path: Path) -> None:
    machine = tmp_path / "bang.machine"
    machine.write_text(
        'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
        'bang cap:in="media:enc=utf-8;word";op=bang;out="media:enc=utf-8;word"\n'
        "doc -> split -> ws\nws -> bang -> out\n"
    )
    out = tmp_path / "out"
    done = cartridge("run", str(machine), "-c", WORDKIT, "-i", "doc=ok boom", "-o", str(out))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        done.stderr.strip().splitlines()[0]
    ] and done.stderr.startswith("BANG (input): step 'bang', item 1")
    assert list(out.iterdir()) == []
    as_json = cartridge("run", str(machine), "-c", WORDKIT, "-i", "doc=boom", "--json")
    report = json.loads(as_json.stdout)
    assert (report["ok"], report["code"], report["step"], report["item"]) == (
        False,
        "BANG",
        "bang",
        0,
    )


def test_a_refused_machine_is_exit_1_naming_its_kind(tmp_path: Path) -> None:
    machine = tmp_path / "bad.machine"
    machine.write_text("doc -> nowhere -> out\n")
    done = cartridge("run", str(machine), "-c", WORDKIT, "-i", "doc=x")
    assert done.returncode == 1
    assert done.stderr.startswith("UndefinedAliasError: ") and "'nowhere'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "/no/such.machine", "-c", WORDKIT], "no machine file"),
        (
            ["run", str(MACHINES / "chain.machine"), "-c", "/no/such.py", "-i", "doc=x"],
            "no cartridge",
        ),
        (["run", str(MACHINES / "chain.machine"), "-i", "doc=x"], "at least one --cartridge"),
        (["run", str(MACHINES / "chain.machine"), "-c", WORDKIT, "-i", "doc"], "NAME=VALUE"),
        (["run", str(MACHINES / "chain.machine"), "-c", WORDKIT, "-i", "doc=@/no/file"], "no file"),
        (["run", str(MACHINES / "chain.machine"), "-c", WORDKIT, "-i", "dog=x"], "no such input"),
        (["run", str(MACHINES / "chain.machine"), "-c", WORDKIT], "not given"),
        (["run", str(MACHINES / "route.machine"), "-c", WORDKIT, "-i", "doc=x"], "--output-dir"),
    ],
)
def test_usage_errors_are_exit_2_with_one_line(args: list[str], words: str) -> None:
    done = cartridge(*args)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def _on_terminal(*args: str, stdout_file: Path | None = None) -> bytes:
    """Run the CLI with stderr (and stdout, unless a file is given) on a pseudo-terminal."""
    import os
    import pty

    master, slave = pty.openpty()
    out = open(stdout_file, "wb") if stdout_file is not None else None  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "cartridge_runtime.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=out if out is not None else slave,
        stderr=slave,
    )
    os.close(slave)
    got = b""
    while True:
        try:
            block = os.read(master, 65536)
        except OSError:
            break
        if not block:
            break
        got += block
    assert proc.wait(timeout=120) == 0
    os.close(master)
    if out is not None:
        out.close()
    return got.replace(b"\r\n", b"\n")


def test_on_a_terminal_the_data_stays_whole_and_the_summary_follows() -> None:
    got = _on_terminal("run", str(MACHINES / "shout.machine"), "-c", WORDKIT, "-i", "doc=one two")
    lines = got.decode().splitlines()
    assert "ONE TWO" in lines  # the data, on a line of its own
    assert any("machine run" in line for line in lines)


def test_the_live_table_runs_on_a_terminal_when_the_data_goes_elsewhere(tmp_path: Path) -> None:
    out = tmp_path / "out"
    got = _on_terminal(
        "run", str(MACHINES / "route.machine"), "-c", WORDKIT, "-i", "doc=ant elephants",
        "-o", str(out),
    )  # fmt: skip
    assert (out / "long_words").read_text() == "ELEPHANTS"
    assert b"upper" in got and b"\x1b[" in got  # the table was drawn with terminal codes
