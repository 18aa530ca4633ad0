"""Every third-party module the package imports is a declared runtime dependency."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Import name -> distribution name, where they differ.
DISTRIBUTIONS = {"fnv_c": "fnv-c", "opentelemetry": "opentelemetry-api"}
#: Distributions imported only by modules behind an optional extra -> that extra.
OPTIONAL = {"opentelemetry-api": "otel"}  # engine/_otel.py, imported on first use


#: Subpackages that may import what an optional extra installs: subpackage -> extra.
EXTRAS = {"engine/ray": "ray"}


def _names(deps: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower() for dep in deps}


def _declared(extra: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    if extra is not None:
        return _names(project["optional-dependencies"][extra])
    return _names(project["dependencies"])


def _in_extra(path: Path) -> str | None:
    rel = path.relative_to(ROOT / "cartridge_runtime").as_posix()
    return next((extra for sub, extra in EXTRAS.items() if rel.startswith(sub + "/")), None)


def _imported(extra: str | None = None) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "cartridge_runtime").rglob("*.py"):
        if _in_extra(path) != extra:
            continue
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


@pytest.mark.parametrize("extra", sorted(set(EXTRAS.values())))
def test_an_extra_subpackage_imports_only_the_base_and_its_extra(extra: str) -> None:
    allowed = _declared() | _declared(extra)
    missing = {
        DISTRIBUTIONS.get(name, name).lower()
        for name in _imported(extra)
        if DISTRIBUTIONS.get(name, name).lower() not in allowed
    }
    assert missing == set(), f"imported but not declared in the {extra} extra: {sorted(missing)}"
