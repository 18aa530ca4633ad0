"""The protocol package resolves its public names on first use: every name of ``__all__``
is there, the table of homes agrees with the names type checkers see, and a module that needs
a few names (``manifest``, ``urn``) does not import the rest of the package."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cartridge_runtime.protocol as protocol

# Submodules whose import builds many attrs classes and enums: none is needed by a manifest.
HEAVY = (
    "cartridge_runtime.protocol._host_conn",
    "cartridge_runtime.protocol._cartridge_conn",
    "cartridge_runtime.protocol._cartridge_state",
    "cartridge_runtime.protocol._request_state",
    "cartridge_runtime.protocol._codec",
    "cartridge_runtime.protocol._events",
    "cartridge_runtime.protocol._host_startup",
    "cartridge_runtime.protocol._handshake",
)


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``statement``."""
    probe = textwrap.dedent(
        f"""
        import sys
        {statement}
        sys.stdout.write("\\n".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(done.stdout.splitlines())


@pytest.mark.parametrize("name", protocol.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(protocol, name)
    assert value is not None
    home = protocol._EXPORTS.get(name) or protocol._SUBMODULE_NAMES[name]
    module = sys.modules[f"cartridge_runtime.protocol.{home}"]
    expected = module if name in protocol._SUBMODULE_NAMES else getattr(module, name)
    assert value is expected


def test_the_table_is_the_public_names_and_what_type_checkers_import() -> None:
    table = set(protocol._EXPORTS) | set(protocol._SUBMODULE_NAMES)
    assert table == set(protocol.__all__)
    assert len(protocol.__all__) == len(set(protocol.__all__))
    source = Path(protocol.__file__).read_text(encoding="utf-8")
    checked: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                home = node.module if node.module else alias.name
                checked[alias.asname or alias.name] = home
    assert checked == {**protocol._EXPORTS, **protocol._SUBMODULE_NAMES}


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = protocol.no_such_name  # type: ignore[attr-defined]
    assert not hasattr(protocol, "_no_such_private")


def test_dir_lists_the_public_names() -> None:
    assert set(protocol.__all__) <= set(dir(protocol))


def test_from_import_of_a_name_loads_only_its_home() -> None:
    loaded = _loaded_after("from cartridge_runtime.protocol import PoolAdmission")
    assert "cartridge_runtime.protocol._admission" in loaded
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


@pytest.mark.parametrize(
    "module", ["cartridge_runtime", "cartridge_runtime.manifest", "cartridge_runtime.urn"]
)
def test_lean_imports_leave_the_heavy_submodules_alone(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert module in loaded
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


def test_a_resolved_name_is_kept_on_the_package() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import cartridge_runtime.protocol as p; f = p.Frame;"
            " print('Frame' in vars(p), p.Frame is f)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["True", "True"]
