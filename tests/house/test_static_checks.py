"""The linter and the type checker stay clean, so CI catches a regression the day it lands.

Both tools come from the ``dev`` extra (``scripts/test`` installs it); without one, its test
is skipped with a reason rather than failing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_tool(module: str, *args: str, timeout: float) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (it comes with the 'dev' extra)")
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{module} {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"


def test_ruff_check_is_clean() -> None:
    _run_tool("ruff", "check", "--no-cache", ".", timeout=120)


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    # The strict modules are listed in pyproject's [tool.mypy] overrides.
    _run_tool("mypy", "cartridge_runtime", timeout=240)
