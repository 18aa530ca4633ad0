"""The ``cartridge`` command has one usage error type, in the package's error tree."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from cartridge_runtime.cli._call_inputs import UsageError as CallUsage
from cartridge_runtime.cli._run_setup import Usage
from cartridge_runtime.cli._sources import SourceError
from cartridge_runtime.cli._usage import UsageError
from cartridge_runtime.errors import DefinitionError

CLI_DIR = Path(__file__).resolve().parents[2] / "cartridge_runtime" / "cli"


def test_one_usage_error_type_under_definition_error() -> None:
    assert CallUsage is UsageError and Usage is UsageError and SourceError is UsageError
    assert issubclass(UsageError, DefinitionError)
    defined = []
    for path in sorted(CLI_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and "usage" in node.name.lower():
                defined.append(f"{path.name}:{node.name}")
    assert defined == ["_usage.py:UsageError"]


def test_a_missing_run_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", "log", "nope", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == f"error: no runs recorded in {tmp_path}\n"
