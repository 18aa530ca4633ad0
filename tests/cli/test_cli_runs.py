"""``cartridge run`` that remembers: resume after a failure, run records and ``runs``/``log``,
the HTML report in a headless browser, taps to files, stdin input, timeout, interruption, and
``cartridge cache``.

Each test keeps its records and cache under its own ``CARTRIDGE_HOME``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "tests" / "machine" / "runskit.py"
WORDKIT = str(ROOT / "cartridges" / "wordkit.py")
DATA = "media:data;runs"
TEXT = "media:enc=utf-8"
PART = "media:enc=utf-8;part"


def cap(op: str, src: str = DATA, dst: str = DATA) -> str:
    return f'cap:in="{src}";op={op};out="{dst}"'


CHAIN = (
    f"s1 {cap('stage-1')}\ns2 {cap('stage-2')}\nfin {cap('final')}\n"
    "doc -> s1 -> a\na -> s2 -> b\nb -> fin -> out\n"
)
WORDS = (
    f"p {cap('parts', TEXT, PART)}\nsh {cap('shout', PART, PART)}\n"
    "doc -> p -> ws\nws -> sh -> loud\n"
)


class Home:
    """A CARTRIDGE_HOME, the runskit call log and fail switch, and a machine file."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.log = tmp / "calls.log"
        self.log.touch()
        self.fail = tmp / "fail"
        self.env = {
            **os.environ,
            "CARTRIDGE_HOME": str(self.home),
            "RUNSKIT_CALL_LOG": str(self.log),
            "RUNSKIT_FAIL": str(self.fail),
        }

    def machine(self, text: str, name: str = "m.machine") -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def cartridge(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cartridge_runtime.cli", *args],
            capture_output=True,
            text=True,
            timeout=180,
            env=self.env,
            input=stdin,
        )

    def calls(self) -> Counter[str]:
        counted = Counter(self.log.read_text().split())
        self.log.write_text("")
        return counted


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def test_resume_after_a_failure_calls_only_the_failed_step(home: Home) -> None:
    machine = home.machine(CHAIN)
    home.fail.write_text("on")
    failed = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=payload", "-v")
    assert failed.returncode == 1
    assert "FAILED_ON_PURPOSE" in failed.stderr
    assert "final: failing on purpose" in failed.stderr  # -v: the cartridge's stderr
    assert home.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})
    home.fail.unlink()
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=payload", "--resume")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "payload"
    assert home.calls() == Counter({"final": 1})


def test_without_resume_every_step_is_called(home: Home) -> None:
    machine = home.machine(CHAIN)
    for _ in range(2):
        done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=x")
        assert done.returncode == 0, done.stderr
    assert home.calls() == Counter({"stage-1": 2, "stage-2": 2, "final": 2})
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=x", "--no-cache",
                          "--resume")  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("error: --no-cache")


def test_records_round_trip_through_runs_and_log(home: Home) -> None:
    machine = home.machine(CHAIN)
    home.fail.write_text("on")
    assert home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=abc").returncode == 1
    home.fail.unlink()
    ok = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=abc", "--resume",
                        "--json")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    ok_id = json.loads(ok.stdout)["run"]
    listed = [json.loads(line) for line in home.cartridge("runs", "--json").stdout.splitlines()]
    assert [r["status"] for r in listed] == ["ok", "failed"]
    assert listed[0]["id"] == ok_id and listed[0]["machine"] == str(machine)
    assert all(r["seconds"] > 0 for r in listed)
    table = home.cartridge("runs")
    assert ok_id in table.stdout and "failed" in table.stdout
    failed = json.loads(home.cartridge("log", listed[1]["id"], "--json").stdout)
    assert failed["status"] == "failed"
    assert failed["error"]["step"] == "fin" and failed["error"]["code"] == "FAILED_ON_PURPOSE"
    assert failed["error"]["class"] == "input"
    assert "final: failing on purpose" in failed["stderr"]["runskit"]
    assert failed["inputs"]["doc"]["size"] == 3
    kinds = [e["event"] for e in failed["events"]]
    assert kinds.count("StepStarted") == 3 and kinds.count("StepFinished") == 2
    resumed = json.loads(home.cartridge("log", ok_id[:17], "--json").stdout)
    assert resumed["steps"]["s1"]["hits"] == 1 and resumed["steps"]["s1"]["calls"] == 0
    assert resumed["steps"]["fin"]["misses"] == 1 and resumed["steps"]["fin"]["calls"] == 1
    assert resumed["steps"]["fin"]["bytes_in"] == resumed["steps"]["fin"]["bytes_out"] == 3
    finished = [e for e in resumed["events"] if e["event"] == "StepFinished"]
    assert [e["cache"] for e in finished] == ["hit", "hit", "miss"]
    assert all(e["t"] >= 0 for e in resumed["events"])
    text = home.cartridge("log", "last")
    assert text.returncode == 0 and "run " + ok_id in text.stdout
    missing = home.cartridge("log", "nope")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no run 'nope'")


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_the_report_renders_in_a_headless_browser_with_no_console_error(home: Home) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium installed (the CI installs the distribution's package)")
    machine = home.machine(WORDS)
    report = home.tmp / "report.html"
    assert home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=a b c").returncode == 0
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=a b c d", "--resume",
                          "--report", str(report))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = report.read_text()
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    shown = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={home.tmp / 'profile'}", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    dom = shown.stdout
    assert 'data-ready="1"' in dom
    assert 'data-bars="5"' in dom  # parts once, shout once per word
    assert '<pre id="page-errors"></pre>' in dom
    assert dom.count('class="bar hit ok"') == 3  # three words were replayed; d and parts ran
    assert "<svg" in dom and ">sh<" in dom
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


def test_the_report_of_a_failed_run_shows_the_error_and_stderr(home: Home) -> None:
    machine = home.machine(CHAIN)
    home.fail.write_text("on")
    report = home.tmp / "failed.html"
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=z", "--report",
                          str(report))  # fmt: skip
    assert done.returncode == 1
    page = report.read_text()
    assert "FAILED_ON_PURPOSE" in page and "step fin" in page
    assert 'class="step failed" data-step="fin"' in page  # the graph marks the failed step
    assert "final: failing on purpose" in page
    again = home.cartridge("report", "last", "-o", str(home.tmp / "again.html"))
    assert again.returncode == 0 and (home.tmp / "again.html").read_text() == page


def test_any_node_goes_to_a_file_and_intermediates_to_a_folder(home: Home) -> None:
    machine = home.machine(WORDS)
    words = home.tmp / "words.txt"
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=ab cd",
                          "--output", f"ws={words}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "AB\nCD\n"  # the one output still goes to stdout
    assert words.read_text() == "ab\ncd\n"
    keep = home.tmp / "keep"
    chain = home.machine(CHAIN, "chain.machine")
    done = home.cartridge("run", str(chain), "-c", str(KIT), "-i", "doc=kept",
                          "--keep-intermediates", str(keep))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in keep.iterdir()) == ["a", "b"]
    assert (keep / "a").read_text() == (keep / "b").read_text() == done.stdout == "kept"
    bad = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=x", "--output", "zz=f")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --output zz")


def test_an_input_can_come_from_stdin(home: Home) -> None:
    machine = home.machine(CHAIN)
    done = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=@-", stdin="streamed")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "streamed"
    twice = home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=@-", "-i", "x=@-")
    assert twice.returncode == 2 and "standard input" in twice.stderr


def test_timeout_fails_the_run_in_one_line(home: Home) -> None:
    machine = home.machine(
        'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
        'slow cap:in="media:enc=utf-8;word";op=slow;out="media:enc=utf-8;word"\n'
        "doc -> split -> ws\nws -> slow -> out\n"
    )
    home.env["WORDKIT_SLOW_SECONDS"] = "30"
    done = home.cartridge("run", str(machine), "-c", WORDKIT, "-i", "doc=a", "--timeout", "3")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("TIMEOUT")
    record = json.loads(home.cartridge("log", "last", "--json").stdout)
    assert record["status"] == "failed" and record["error"]["code"] == "TIMEOUT"
    bad = home.cartridge("run", str(machine), "-c", WORDKIT, "-i", "doc=a", "--timeout", "0")
    assert bad.returncode == 2 and "--timeout" in bad.stderr


def test_an_interrupted_run_says_so_on_stderr(home: Home) -> None:
    machine = home.machine(
        'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
        'slow cap:in="media:enc=utf-8;word";op=slow;out="media:enc=utf-8;word"\n'
        "doc -> split -> ws\nws -> slow -> out\n"
    )
    env = {**home.env, "WORDKIT_SLOW_SECONDS": "60"}
    process = subprocess.Popen(
        [sys.executable, "-m", "cartridge_runtime.cli", "run", str(machine), "-c", WORDKIT,
         "-i", "doc=a"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    runs = home.home / "runs"
    for _ in range(600):  # until the run started (its record exists and a call is made)
        events = list(runs.glob("*/events.jsonl")) if runs.is_dir() else []
        if events and "StepStarted" in events[0].read_text():
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted: run" in err and "Traceback" not in err
    record = json.loads(home.cartridge("log", "last", "--json").stdout)
    assert record["status"] == "interrupted"


def test_cache_ls_gc_and_clear(home: Home) -> None:
    machine = home.machine(CHAIN)
    assert home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=xyz").returncode == 0
    listed = [
        json.loads(line) for line in home.cartridge("cache", "ls", "--json").stdout.splitlines()
    ]
    assert sorted(e["step"] for e in listed) == ["fin", "s1", "s2"]
    assert all(e["size"] == 3 for e in listed)
    # The three steps echo: one blob holds what they all stored, counted once.
    assert len(list((home.home / "steps" / "blobs").glob("*/*"))) == 1
    gc = home.cartridge("cache", "gc", "--max-size", "3")
    assert gc.returncode == 0 and "removed 0 entries" in gc.stderr
    gc = home.cartridge("cache", "gc", "--max-size", "2")
    assert gc.returncode == 0 and "removed 3 entries, freed 3 bytes" in gc.stderr
    assert home.cartridge("cache", "ls", "--json").stdout == ""
    assert home.cartridge("run", str(machine), "-c", str(KIT), "-i", "doc=xyz").returncode == 0
    bad = home.cartridge("cache", "gc", "--max-size", "lots")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --max-size")
    assert home.cartridge("cache", "clear").returncode == 0
    assert home.cartridge("cache", "ls", "--json").stdout == ""
