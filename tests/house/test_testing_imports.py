"""``cartridge_runtime.testing`` is built on the other packages' public names only: no module
of it imports a private (underscore) module or name of another subpackage. The package's own
shared modules at its root (``cartridge_runtime._item``, ``_redact``) are the whole package's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cartridge_runtime.testing

TESTING = Path(cartridge_runtime.testing.__file__).resolve().parent
OWN = "cartridge_runtime.testing"


def _private_imports(source: str, package: str = OWN) -> list[str]:
    """Every import in ``source`` (a module of ``package``, at any depth of the tree: module
    level, under TYPE_CHECKING, in a function) that reaches a private module or name of a
    subpackage of ``cartridge_runtime`` other than ``package``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] != "cartridge_runtime" or target.startswith(f"{package}."):
                continue
            # parts[1] is a subpackage, or a root module shared by the whole package.
            if len(parts) > 2 and any(p.startswith("_") for p in parts[2:]):
                found.append(target)
    return found


def test_the_testing_package_imports_no_private_module_of_another_package() -> None:
    offenders = {
        path.name: bad
        for path in sorted(TESTING.glob("*.py"))
        if (bad := _private_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        "from cartridge_runtime.engine._connection._shell import Connection",
        "from ..engine._counters import Counters",
        "from ..engine import _conn",
        "import cartridge_runtime.engine._connection._shell",
        "from cartridge_runtime.protocol import _host_conn",
        "def f():\n    from ..runtime._session import Session\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..engine._links import Flow\n",
    ],
)
def test_the_scan_finds_private_imports(source: str) -> None:
    assert _private_imports(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "from cartridge_runtime.engine import direct_connection",
        "from ..engine import EngineConfig",
        "from ._harness_call import HarnessCall",
        "from cartridge_runtime.testing._harness import CartridgeHarness",
        "from cartridge_runtime._redact import describe",
        "from .. import protocol",
        "import anyio",
    ],
)
def test_the_scan_passes_public_imports(source: str) -> None:
    assert _private_imports(source) == []
