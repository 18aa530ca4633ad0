"""Helpers for the bundled-cartridge tests: load a cartridge script as a module, run it as a
command-line tool, and find its samples."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
CARTRIDGES: Final = ROOT / "cartridges"
SAMPLES: Final = CARTRIDGES / "samples"
#: Generous bound for one subprocess; none of them should take more than a second or two.
SUBPROCESS_TIMEOUT: Final = 60.0


def load_cartridge(name: str) -> ModuleType:
    """Import ``cartridges/<name>.py`` as a module (the scripts are not a package)."""
    module_name = f"_bundled_cartridge_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, CARTRIDGES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def run_cli(name: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``python cartridges/<name>.py ARGS`` with ``stdin`` piped in."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, str(CARTRIDGES / f"{name}.py"), *args],
        input=stdin,
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT,
        cwd=ROOT,
        env=env,
        check=False,
    )


def sample(name: str) -> bytes:
    """The bytes of ``cartridges/samples/<name>``."""
    return (SAMPLES / name).read_bytes()


def assert_conformant(script: Path) -> None:
    """Run the conformance kit (``cartridge_runtime.testing.check_cartridge``) against the
    cartridge script ``script``: it raises ``AssertionError`` naming every failed MUST check.
    Skips, saying why, only when the kit is not importable."""
    import pytest

    try:
        from cartridge_runtime.testing import check_cartridge
    except ImportError:
        pytest.skip("the conformance kit (cartridge_runtime.testing.check_cartridge) is missing")
    report = check_cartridge(str(script))
    assert report.ok
