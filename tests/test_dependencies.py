"""Every third-party module the package imports is a declared runtime dependency."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Import name -> distribution name, where they differ.
DISTRIBUTIONS = {"fnv_c": "fnv-c", "opentelemetry": "opentelemetry-api"}
#: Distributions imported only by modules behind an optional extra -> that extra.
OPTIONAL = {"opentelemetry-api": "otel"}  # engine/_otel.py, imported on first use


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}


def _imported() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "cartridge_runtime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "cartridge_runtime"}


def test_every_imported_package_is_declared() -> None:
    missing = {
        DISTRIBUTIONS.get(name, name).lower()
        for name in _imported()
        if DISTRIBUTIONS.get(name, name).lower() not in _declared()
    }
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for dist, extra in OPTIONAL.items():
        assert any(dep.lower().startswith(dist) for dep in extras[extra]), (dist, extra)
        missing.discard(dist)
    assert missing == set(), (
        f"imported but not declared in [project].dependencies: {sorted(missing)}"
    )
