"""``cartridge`` explains itself: interrupted and killed runs are recorded as such, ``log``
shows a failure, summaries print whole numbers, binary is kept off a terminal, an empty stdin
is named."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = str(ROOT / "tests" / "machine" / "runskit.py")
WORDKIT = str(ROOT / "cartridges" / "wordkit.py")
INTEROP = str(ROOT / "cartridges" / "interop.py")
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]
DATA = "media:data;runs"
WORD = "media:enc=utf-8;word"
CHAIN = (
    f'fin cap:in="{DATA}";op=final;out="{DATA}"\ns1 cap:in="{DATA}";op=stage-1;out="{DATA}"\n'
    "doc -> s1 -> a\na -> fin -> out\n"
)
SLOW = f'slow cap:in="{WORD}";op=slow;out="{WORD}"\ndoc -> slow -> out\n'
UP_SLOW = (
    f'up cap:in="{WORD}";op=upper;out="{WORD}"\nslow cap:in="{WORD}";op=slow;out="{WORD}"\n'
    "doc -> up -> w\nw -> slow -> out\n"
)
SIZE = re.compile(r"\b\d+(\.\d)? (B|KiB|MiB|GiB)\b")


class Home:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {
            **os.environ,
            "CARTRIDGE_HOME": str(tmp / "home"),
            "RUNSKIT_CALL_LOG": str(tmp / "calls.log"),
            "RUNSKIT_FAIL": str(tmp / "fail"),
        }

    def machine(self, text: str) -> Path:
        path = self.tmp / "m.machine"
        path.write_text(text)
        return path

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], capture_output=True, text=True, timeout=180, env={**self.env, **env}
        )

    def start(self, *args: str, slow: str = "120") -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, "WORDKIT_SLOW_SECONDS": slow},
        )

    def record(self) -> dict[str, object]:
        done = self.run("log", "last", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def _wait_for(predicate: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _running_step(home: Home, step: str) -> bool:
    runs = home.tmp / "home" / "runs"
    for folder in runs.glob("*") if runs.is_dir() else ():
        events = folder / "events.jsonl"
        if events.exists() and f'"StepStarted", "step": "{step}"' in events.read_text():
            return True
    return False


def test_log_shows_a_failed_run_s_error(home: Home) -> None:
    (home.tmp / "fail").write_text("on")
    machine = home.machine(CHAIN)
    assert home.run("run", str(machine), "-c", KIT, "-i", "doc=abc").returncode == 1
    text = home.run("log", "last").stdout
    assert "failed at step fin: FAILED_ON_PURPOSE (input):" in text


@pytest.mark.parametrize(("text", "step", "finished"), [(SLOW, "slow", 0), (UP_SLOW, "slow", 1)])
def test_an_interrupted_run_records_the_running_step(
    home: Home, text: str, step: str, finished: int
) -> None:
    machine = home.machine(text)
    report = home.tmp / "report.html"
    proc = home.start("run", str(machine), "-c", WORDKIT, "-i", "doc=word", "--report", str(report))
    try:
        _wait_for(lambda: _running_step(home, step))
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGINT
    if finished:
        assert "reuses the 1 step call it finished" in err
    else:
        assert "no step had finished" in err and "reuses" not in err
    record = home.record()
    assert record["status"] == "interrupted"
    (last,) = [e for e in record["events"] if e["event"] == "StepInterrupted"]  # type: ignore[attr-defined]
    assert last["step"] == step and last["seconds"] > 0.2 and last["bytes_in"] == 4
    assert record["steps"][step]["interrupted"] == 1  # type: ignore[index]
    assert f"interrupted in step {step} after" in home.run("log", "last").stdout
    page = report.read_text()  # written although the run was interrupted
    assert f"{step} (interrupted)</text>" in page  # the graph marks it
    assert page.count('class="bar interrupted"') == 1
    assert 'class="axis"' in page and "0.0 s</span>" in page  # a time axis with ticks
    assert "not written: the run did not succeed" in page


def test_the_report_names_outputs_inputs_and_the_runs_it_reused(home: Home) -> None:
    machine = home.machine(CHAIN)
    source = home.tmp / "in.txt"
    source.write_text("abc")
    first = home.run("run", str(machine), "-c", KIT, "-i", f"doc=@{source}")
    assert first.returncode == 0, first.stderr
    first_id = json.loads(home.run("runs", "--json").stdout.splitlines()[0])["id"]
    out, report = home.tmp / "out", home.tmp / "report.html"
    done = home.run("run", str(machine), "-c", KIT, "-i", f"doc=@{source}", "--resume",
                    "--output-dir", str(out), "--report", str(report))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = report.read_text()
    assert f"<td>{source}</td>" in page  # the input's path
    assert f"<td>out</td><td>3 B</td><td>{(out / 'out').resolve()}</td>" in page
    assert f'<a href="{first_id}.html">run {first_id}</a>: fin, s1' in page
    assert '<pre id="page-errors"></pre>' in page and "pre:empty{display:none}" in page


def test_a_killed_run_is_stale_and_leaves_no_hidden_file_after_a_resume(home: Home) -> None:
    machine = home.machine(SLOW)
    out = home.tmp / "out"
    args = ("run", str(machine), "-c", WORDKIT, "-i", "doc=word", "--output-dir", str(out))
    proc = home.start(*args)
    try:
        _wait_for(lambda: _running_step(home, "slow"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert [p.name.startswith(".out.") for p in out.iterdir()] == [True]  # left by SIGKILL
    (listed,) = [json.loads(line) for line in home.run("runs", "--json").stdout.splitlines()]
    assert listed["status"] == "stale"
    assert "stale: the process that ran it is gone" in home.run("log", "last").stdout
    done = home.run(*args, "--resume", WORDKIT_SLOW_SECONDS="0")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["out"]


def test_the_summary_off_a_terminal_prints_whole_numbers(home: Home) -> None:
    machine = home.machine(CHAIN)
    big = home.tmp / "big.bin"
    big.write_bytes(b"x" * 3_000_000)
    done = home.run("run", str(machine), "-c", KIT, "-i", f"doc=@{big}", "-o", str(home.tmp / "o"))
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stderr
    assert "2.9 MiB" in done.stderr  # read and written, whole
    head = next(line for line in done.stderr.splitlines() if line.startswith("step"))
    assert head.split() == ["step", "calls", "map", "items", "cache", "hits", "skipped",
                            "absent", "read", "written", "seconds"]  # fmt: skip
    listing = home.run("cache", "ls")
    assert listing.returncode == 0 and SIZE.search(listing.stdout), listing.stdout
    assert SIZE.search(listing.stderr)
    steps = home.tmp / "home" / "steps"
    assert home.run("cache", "ls", "--cache", str(steps)).stdout == listing.stdout
    assert home.run("cache", "ls", "--dir", str(steps)).stdout == listing.stdout  # the old name
    assert "--dir" not in home.run("cache", "ls", "--help").stdout


def _on_terminal(command: list[str], stdin: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` with stdout on a pseudo-terminal: its status and stderr."""
    leader, follower = pty.openpty()
    try:
        with stdin.open("rb") as source:
            done = subprocess.run(
                command, stdin=source, stdout=follower, stderr=subprocess.PIPE, timeout=180,
                env=env,
            )  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)
    return done.returncode, done.stderr.decode()


def test_binary_output_is_refused_on_a_terminal(home: Home, tmp_path: Path) -> None:
    binary = tmp_path / "bin"
    binary.write_bytes(bytes(range(256)) * 4)
    status, err = _on_terminal([*CLI, "call", INTEROP, "echo"], binary, home.env)
    assert status == 2 and "binary" in err and "-o FILE" in err, err
    text = tmp_path / "text"
    text.write_bytes("héllo\n".encode())
    assert _on_terminal([*CLI, "call", INTEROP, "echo"], text, home.env)[0] == 0
    machine = home.machine(CHAIN)
    status, err = _on_terminal([*CLI, "run", str(machine), "-c", KIT, "-i", f"doc=@{binary}"],
                               binary, home.env)  # fmt: skip
    assert status == 2 and "-o FILE" in err and "Traceback" not in err, err


def test_an_empty_stdin_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for command in ([*CLI, "call", INTEROP, "echo"], [sys.executable, INTEROP, "echo"]):
        with empty.open("rb") as stdin:
            done = subprocess.run(command, stdin=stdin, capture_output=True, text=True,
                                  timeout=120)  # fmt: skip
        assert done.returncode == 2
        assert "standard input was empty" in done.stderr, done.stderr


def test_demo_help_prints_help_and_runs_nothing() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("usage: ./scripts/demo") and "bundled cartridges" in done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_the_demo_piped_has_short_rules_and_marks_what_it_cut() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) < 1000
    assert not any(set(line.strip()) == {"─"} for line in lines)  # no rule across 10,000 columns
    assert "… " in done.stdout or "…" in done.stdout  # the long results are marked as cut
