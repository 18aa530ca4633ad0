"""``scripts/ray_two_nodes.py``: two Ray nodes on this host, one lost, the replica moves.

The walk-through itself (marked ``ray`` and ``slow``: it starts a two-node cluster, about 6 s
and 600 MiB here) runs the script as a user would and checks what it printed, then that no
process it started is left, even when it had to be stopped. The argument checks and the error
paths run without Ray.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "scripts" / "ray_two_nodes.py"
MARKER: Final = "CARTRIDGE_RAY_TWO_NODES"


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def marked(prefix: str) -> list[int]:
    """Live processes whose environment has ``MARKER=prefix...``."""
    needle = f"{MARKER}={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(v.startswith(needle) for v in environ.split(b"\0")):
            found.append(int(entry.name))
    return found


@pytest.mark.ray
@pytest.mark.slow
def test_a_lost_node_moves_the_replica_to_the_other_node() -> None:
    pytest.importorskip("ray")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--timeout", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    temp = re.search(r"temp dir (/tmp/ray2n-\S+);", out)
    assert temp is not None, out
    left = marked(temp[1])
    for pid in left:  # a hang guard's cleanup: the script's own was cut short
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    assert not left, f"processes left behind: {left}"
    first = re.search(r"call 1 answered by ray actor \w+ on node (\w+)", out)
    moved = re.search(r"OK: the replica moved from node (\w+) to the head (\w+)", out)
    assert first and moved, out
    assert first[1] == moved[1] != moved[2]
    assert "second node killed" in out and "engine: 2 starts, replica running" in out
    # A call sent before Ray declared the node dead fails as the cartridge's death, typed.
    for failed in re.findall(r"call \d: (\w+): (.*)", out):
        assert failed[0] == "CARTRIDGE_DIED" and "its Ray actor was lost" in failed[1]
    assert not Path(temp[1]).exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "80"], "--port must be 0 (a free one) or 1024 to 65535, not 80"),
        (["--port", "70000"], "--port must be 0 (a free one) or 1024 to 65535, not 70000"),
        (["--timeout", "0"], "--timeout must be a number of seconds above 0, not 0"),
        (["--timeout", "nan"], "--timeout must be a number of seconds above 0, not nan"),
        (["--health-ms", "-1"], "--health-ms must be 0 (Ray's defaults) or more, not -1"),
        (["--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
        (["--nodes", "3"], "unrecognized arguments: --nodes 3"),
    ],
)
def test_a_bad_argument_is_refused_with_status_2(args: list[str], says: str) -> None:
    result = run(*args)
    assert result.returncode == 2 and says in result.stderr, result
    assert "Traceback" not in result.stderr


def test_a_missing_ray_command_is_status_2_naming_it() -> None:
    result = run("--ray", "/no/such/ray")
    assert result.returncode == 2, result
    assert "FAILED: no ray command at /no/such/ray" in result.stdout
    assert "pip install 'cartridge-runtime[ray]'" in result.stdout


def test_a_head_that_does_not_start_is_status_2_with_its_log_and_no_temp_dir_left() -> None:
    result = run("--ray", "/bin/false", "--timeout", "20")
    assert result.returncode == 2, result
    assert "FAILED: ray start (head) ended with status 1" in result.stdout
    temp = re.search(r"temp dir (/tmp/ray2n-\S+);", result.stdout)
    assert temp is not None and not Path(temp[1]).exists()
    assert "Traceback" not in result.stdout + result.stderr
