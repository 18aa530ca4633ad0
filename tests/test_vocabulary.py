"""One vocabulary across the package: each public name means one object, and no two modules
import each other.

Each test names its exceptions explicitly (modules being rewritten elsewhere); the lists are
meant to shrink to empty, and a test fails when an exception is no longer needed.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import cartridge_runtime

PACKAGE = Path(cartridge_runtime.__file__).resolve().parent

#: Public names still bound to two objects: name -> the modules whose ``__all__`` hold the
#: second object (to be renamed there).
DUPLICATE_NAMES_ALLOWED: dict[str, frozenset[str]] = {
    "Instance": frozenset({"cartridge_runtime.engine._machine_scope"}),
}


def _public_modules() -> list[str]:
    names = ["cartridge_runtime"]
    for info in pkgutil.walk_packages(cartridge_runtime.__path__, "cartridge_runtime."):
        if info.name.endswith("__main__") or ".ray" in info.name:
            continue
        names.append(info.name)
    return names


def _definitions() -> dict[str, dict[int, list[str]]]:
    """Public name -> id of the object it is bound to -> the modules that export it so."""
    found: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name in _public_modules():
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            found[attr][id(getattr(module, attr))].append(name)
    return found


def test_every_public_name_means_one_object() -> None:
    clashes: dict[str, frozenset[str]] = {}
    for attr, objects in _definitions().items():
        if len(objects) > 1:
            groups = sorted(objects.values(), key=len)
            clashes[attr] = frozenset(m for group in groups[:-1] for m in group)
    assert clashes == DUPLICATE_NAMES_ALLOWED


def _imports(path: Path, module: str, modules: Collection[str]) -> set[str]:
    """Every module ``path`` imports, at module level, under TYPE_CHECKING or in a function
    (``from pkg import sub`` loads ``pkg.sub``; ``from pkg import name`` needs ``pkg``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                full = f"{base}.{node.module}" if node.module else base
            else:
                full = node.module or ""
            for alias in node.names:
                sub = f"{full}.{alias.name}"
                out.add(sub if sub in modules else full)
    return out


def _module_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _circles() -> list[frozenset[str]]:
    files = _module_files()
    graph = {
        module: {
            target
            for target in _imports(path, module, files)
            if target in files and target != module
        }
        for module, path in files.items()
    }
    # Two modules are in one circle when each reaches the other.
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            here = todo.pop()
            if here not in seen:
                seen.add(here)
                todo.extend(graph[here])
        reach[start] = seen
    circles = {
        frozenset({m} | {n for n in reach[m] if m in reach[n]})
        for m in graph
        if any(m in reach[n] for n in reach[m])
    }
    return sorted(circles, key=sorted)


#: Circles in modules being rewritten elsewhere (runtime sessions, engine connections).
CIRCLES_ALLOWED = frozenset(
    {
        frozenset({"cartridge_runtime.runtime._context", "cartridge_runtime.runtime._request"}),
        frozenset(
            {
                "cartridge_runtime.runtime._handlers",
                "cartridge_runtime.runtime._reader",
                "cartridge_runtime.runtime._runtime",
                "cartridge_runtime.runtime._session",
                "cartridge_runtime.runtime._wire",
            }
        ),
        frozenset(
            {
                "cartridge_runtime.engine._conn",
                "cartridge_runtime.engine._health",
                "cartridge_runtime.engine._startup",
            }
        ),
        frozenset({"cartridge_runtime.engine._engine", "cartridge_runtime.engine._response"}),
    }
)


def test_no_two_modules_import_each_other() -> None:
    assert set(_circles()) == CIRCLES_ALLOWED
