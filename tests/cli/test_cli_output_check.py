"""``cartridge call`` against a cartridge whose manifest ships a media definition: an output
that breaks it ends the command with one readable line and a non-zero status (HST-24)."""

from __future__ import annotations

import subprocess
import sys

from _engine_helpers import ROOT

CLI = [sys.executable, "-m", "cartridge_runtime.cli"]
FIXTURE = ROOT / "tests" / "fixtures" / "schema_cartridge.py"


def _call(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, "call", str(FIXTURE), "make"], input=stdin, capture_output=True, timeout=120
    )


def test_an_output_that_fits_the_shipped_definition() -> None:
    done = _call(b'{"name": "lamp"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"name": "lamp"}'


def test_an_output_that_breaks_it_is_one_line_and_a_failure() -> None:
    done = _call(b'{"name": 7}')
    assert done.returncode != 0
    (line,) = done.stderr.decode().strip().splitlines()
    assert line.startswith("OUTPUT_INVALID (internal): ")
    assert line.endswith("breaks its media definition at '/name': type")
    assert "Traceback" not in done.stderr.decode()
