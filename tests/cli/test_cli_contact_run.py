"""``cartridge run`` never leaves a mess: an interrupted run removes its temporary files and
says so, outputs honour the umask, path mistakes are usage errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORDKIT = str(ROOT / "cartridges" / "wordkit.py")
MACHINES = ROOT / "cartridges" / "samples" / "machines"
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]
SLOW = 'slow cap:in="media:enc=utf-8;word";op=slow;out="media:enc=utf-8;word"\ndoc -> slow -> out\n'


def cartridge(*args: str, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def child() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=120, preexec_fn=child
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_removes_its_temporary_files(tmp_path: Path, signum: int) -> None:
    machine = tmp_path / "slow.machine"
    machine.write_text(SLOW)
    out = tmp_path / "out"
    env = {**os.environ, "WORDKIT_SLOW_SECONDS": "120"}
    proc = subprocess.Popen(
        [*CLI, "run", str(machine), "-c", WORDKIT, "-i", "doc=word", "--output-dir", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for _ in range(1200):  # the temporary output file exists once the run started
            if out.is_dir() and any(out.iterdir()):
                break
            time.sleep(0.05)
        assert out.is_dir() and any(out.iterdir())
        time.sleep(0.5)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert list(out.iterdir()) == []
    assert proc.returncode == 128 + signum
    assert "interrupted" in err and "Traceback" not in err


def test_outputs_honour_the_umask(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = cartridge("run", str(MACHINES / "route.machine"), "-c", WORDKIT,
                     "-i", "doc=tiny elephants ox giraffes", "--output-dir", str(out),
                     umask=0o027)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for path in out.iterdir():
        assert path.stat().st_mode & 0o777 == 0o640, path


def test_an_output_dir_naming_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    done = cartridge("run", str(MACHINES / "route.machine"), "-c", WORDKIT, "-i", "doc=a",
                     "--output-dir", str(tmp_path / "file"))  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "is not a directory" in line


def test_a_directory_given_as_a_cartridge_says_so(tmp_path: Path) -> None:
    done = cartridge("run", str(MACHINES / "route.machine"), "-c", str(tmp_path), "-i", "doc=a")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "is a directory" in line


def test_a_reader_that_goes_away_ends_the_run_quietly(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("word " * 30_000)  # 210 kB of output: more than a pipe holds
    proc = subprocess.Popen(
        [*CLI, "run", str(MACHINES / "chain.machine"), "-c", WORDKIT, "-i", f"doc=@{doc}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.read(10)  # like `| head -c 10`
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "ExceptionGroup" not in err
