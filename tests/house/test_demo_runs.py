"""The main job runs whole: every scenario of ``scripts/demo.py`` ends as it should, the relay's
cartridge host included, and the demo exits 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_every_scenario() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.count("│") == 5]  # table rows
    results = [row.split("│")[3].strip() for row in rows]
    assert len(rows) >= 17 and set(results) == {"ok", "expected error"}
    assert results.count("expected error") == 2
    relay = [row for row in rows if "Relay:" in row]
    assert len(relay) == 1 and "peer call and 8 MiB over tools" in relay[0]
    assert "tools/interop: running, on host tools" in done.stdout
    assert "0 protocol errors" in done.stdout and "Traceback" not in done.stderr
