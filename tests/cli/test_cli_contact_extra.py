"""Cartridge authors get a ``testing`` extra (pytest, pytest-asyncio), and ``cartridge new``
names it where it says how to run the test it wrote."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_testing_extra_brings_pytest_and_pytest_asyncio() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["testing"]
    names = {spec.split(">")[0].split("=")[0].strip() for spec in extra}
    assert names == {"pytest", "pytest-asyncio"}


def test_cartridge_new_names_the_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", "new", "hello", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'cartridge-runtime[testing]'" in done.stdout
