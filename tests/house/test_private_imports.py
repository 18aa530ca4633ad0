"""The rule for imports between the package's rooms.

A subpackage (``engine``, ``runtime``, ``protocol``...) reaches another one only through that
package's public names, the ones its ``__init__`` re-exports. Two kinds of places are open to
all: the root's private modules (``_report``, ``_redact``, ``_item``, ``_version``) and the
``_plumbing`` package, which exist to be shared, and the exceptions listed in
:data:`ALLOWED`, each with the reason it is one. A new cross-room private import fails here
until it is made public or listed with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cartridge_runtime"

#: (importing module, imported private module) -> why it may.
ALLOWED: dict[tuple[str, str], str] = {
    (
        "cartridge_runtime.cli._call_inputs",
        "cartridge_runtime.runtime._cli",
    ): "`cartridge call` plans its invocations with CLI mode's own argument planning",
    (
        "cartridge_runtime.cli._call_run",
        "cartridge_runtime.runtime._cli",
    ): "`cartridge call` reads stdin with CLI mode's reader, so both read it alike",
    (
        "cartridge_runtime.cli.tee",
        "cartridge_runtime.conformance._tee",
    ): "the command is the shell of the kit's tee",
    (
        "cartridge_runtime.cli.trace",
        "cartridge_runtime.conformance._trace",
    ): "the command is the shell of the kit's capture reader",
    (
        "cartridge_runtime.runtime._frames._wire",
        "cartridge_runtime.protocol._codec",
    ): "the per-CHUNK fast path writes a byte string's head without the public encoder",
    (
        "cartridge_runtime.relay._forward",
        "cartridge_runtime.protocol._speedups",
    ): "the host's forwarding table binds its own compiled functions (relay C in the extension)",
    (
        "cartridge_runtime.relay._forward",
        "cartridge_runtime.protocol._constants",
    ): "the forwarding table honours the pure-Python switch as the codec's fast paths do",
    (
        "cartridge_runtime.relay._switch",
        "cartridge_runtime.protocol._frame",
    ): "the switch gives out routing ids from the id cache (int_id), as a connection does",
}


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _imported(path: Path, root: Path) -> set[str]:
    """Every module (or module.name) ``path`` imports, as absolute dotted names."""
    module, is_package = _module_name(path, root)
    here = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            found.add(full)
            found.update(f"{full}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def cross_room_private_imports(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """(importer, private module of another subpackage) pairs in the package under ``root``."""
    pairs: set[tuple[str, str]] = set()
    for path in root.rglob("*.py"):
        importer, _ = _module_name(path, root)
        own = importer.split(".")[1] if importer.count(".") else ""
        for target in _imported(path, root):
            parts = target.split(".")
            if parts[0] != "cartridge_runtime" or len(parts) < 3:
                continue  # the root's own modules are open to all
            room = parts[1]
            if room == own or room.startswith("_"):
                continue  # the same room, or a shared private package (_plumbing)
            private_at = next((i for i, p in enumerate(parts[2:], 2) if p.startswith("_")), None)
            if private_at is None:
                continue
            pairs.add((importer, ".".join(parts[: private_at + 1])))
    return pairs


def test_rooms_reach_each_other_through_public_names_only() -> None:
    unexpected = sorted(cross_room_private_imports() - set(ALLOWED))
    assert unexpected == [], "make the names public, or list the import with its reason"


def test_every_listed_exception_is_still_needed() -> None:
    assert sorted(set(ALLOWED) - cross_room_private_imports()) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from ..engine._call import CallState\n", True),
        ("from cartridge_runtime.urn._media import MEDIA_VOID\n", True),
        ("from ..urn import MEDIA_VOID\n", False),
        ("from .._report import ErrorCode\n", False),
        ("from .._plumbing import FramePump\n", False),
        ("from ._peer import PeerLink\n", False),
    ],
)
def test_the_scan_tells_private_from_public(tmp_path: Path, source: str, found: bool) -> None:
    package = tmp_path / "cartridge_runtime"
    (package / "machine").mkdir(parents=True)
    (package / "machine" / "_mod.py").write_text(source)
    assert bool(cross_room_private_imports(package)) is found
