"""No module calls an underscore method of a class defined in another module.

A class's underscore methods are its own business and its module's: the code that feeds a
request's inputs, for one, goes through :class:`~cartridge_runtime.runtime._input.StreamFeed`
and :class:`~cartridge_runtime.runtime._input_package.PackageFeed`, never ``stream._push_data``.

The check reads the source with :mod:`ast`. A call ``obj._name(...)`` (``obj`` not ``self`` or
``cls``, ``_name`` not a dunder) is a breach when no class of the calling module has a method
``_name`` but a class of another module of the package does. Names are matched, not types: a
module that defines a method of the same name itself is not checked for it (calls between
classes of one module are allowed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cartridge_runtime"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _methods(tree: ast.Module) -> set[str]:
    return {
        item.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


class Modules:
    """Modules parsed once (``modules`` maps a module name to its source), and each one's
    method names: the package's are shared by every check of this file."""

    def __init__(self, modules: dict[str, str]) -> None:
        self.trees = {name: ast.parse(source) for name, source in modules.items()}
        self.own = {name: _methods(tree) for name, tree in self.trees.items()}

    def breaches(self, callers: Iterable[str]) -> list[str]:
        """``module:line: call`` for each breach in ``callers`` (names of the modules)."""
        found = []
        for caller in callers:
            for node in ast.walk(self.trees[caller]):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                attr, target = node.func.attr, node.func.value
                if not _private(attr) or attr in self.own[caller]:
                    continue
                if isinstance(target, ast.Name) and target.id in ("self", "cls"):
                    continue
                if any(attr in methods for name, methods in self.own.items() if name != caller):
                    found.append(f"{caller}:{node.lineno}: {ast.unparse(node.func)}()")
        return found


def _package_sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE.parent)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _subpackages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


@pytest.fixture(scope="module")
def package() -> Modules:
    return Modules(_package_sources())


@pytest.mark.parametrize("subpackage", _subpackages())
def test_no_module_calls_another_modules_private_methods(subpackage: str, package: Modules) -> None:
    prefix = f"cartridge_runtime/{subpackage}/"
    callers = [name for name in package.trees if name.startswith(prefix)]
    assert callers
    assert package.breaches(callers) == []


def test_the_top_level_modules_call_no_private_methods_of_others(package: Modules) -> None:
    callers = [name for name in package.trees if name.count("/") == 1]
    assert package.breaches(callers) == []


def test_the_check_finds_a_call_into_another_modules_class() -> None:
    feeder = "class Stream:\n    def _push(self, v):\n        pass\n"
    caller = "def deliver(s):\n    s._push(1)\n    s.push(2)\n    s.__len__()\n"
    same = "class Box:\n    def _push(self, v):\n        pass\n\ndef use(b):\n    b._push(1)\n"
    mods = Modules({"a.py": feeder, "b.py": caller, "c.py": same})
    assert mods.breaches(["b.py"]) == ["b.py:2: s._push()"]
    assert mods.breaches(["c.py", "a.py"]) == []  # same module, and no call at all
