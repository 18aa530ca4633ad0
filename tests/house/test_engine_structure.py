"""The engine's modules form no import cycle, counting imports under ``TYPE_CHECKING`` and
inside functions: its parts (connection, start-up, health, peer links, routing, calls) talk
through narrow interfaces instead of importing each other both ways."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cartridge_runtime

ROOT = Path(cartridge_runtime.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (absolute names)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def graph(package: str) -> dict[str, set[str]]:
    files = sorted((ROOT.parent / package.replace(".", "/")).rglob("*.py"))
    names = {module_name(p): p for p in files}
    return {
        name: {m for m in imports_of(p) if m in names and m != name} for name, p in names.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_the_walker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", ["cartridge_runtime.engine", "cartridge_runtime.testing"])
def test_no_two_modules_import_each_other(package: str) -> None:
    edges = graph(package)
    # The package's own __init__ re-exports its modules; a module importing the package
    # (``from . import x``) is the same cycle the hook reports, so it counts too.
    assert cycles(edges) == []


def test_the_engine_connection_parts_do_not_import_the_connection() -> None:
    edges = graph("cartridge_runtime.engine")
    for part in (
        "_connection._startup",
        "_connection._health",
        "_peer",
        "_connection._stderr",
        "_response",
    ):
        assert (
            "cartridge_runtime.engine._connection._shell"
            not in edges[f"cartridge_runtime.engine.{part}"]
        )
    assert "cartridge_runtime.engine._engine" not in edges["cartridge_runtime.engine._response"]
