"""The runtime package resolves its public names on first use: every name of ``__all__`` is
there, the table of homes agrees with the names type checkers see, and CLI mode's argument
mapping (which the ``cartridge`` command imports) does not build the handler API."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import cartridge_runtime.runtime as runtime

HEAVY = (
    "cartridge_runtime.runtime._runtime",
    "cartridge_runtime.runtime._blocking",
    "cartridge_runtime.runtime._frames._session",
    "cartridge_runtime.runtime._input",
    "cartridge_runtime.runtime._input_package",
    "cartridge_runtime.runtime._peer",
    "cartridge_runtime.engine",
)


@pytest.mark.parametrize("name", runtime.__all__)
def test_every_public_name_resolves_to_its_home(name: str) -> None:
    value = getattr(runtime, name)
    module = sys.modules[f"cartridge_runtime.runtime.{runtime._EXPORTS[name]}"]
    assert value is getattr(module, name)


def test_the_table_is_the_public_names_and_what_type_checkers_import() -> None:
    assert set(runtime._EXPORTS) == set(runtime.__all__)
    source = Path(runtime.__file__).read_text(encoding="utf-8")
    checked = {
        alias.asname or alias.name: node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    }
    assert checked == runtime._EXPORTS


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = runtime.no_such_name  # type: ignore[attr-defined]


def test_cli_argument_mapping_leaves_the_handler_api_alone() -> None:
    probe = (
        "import sys, cartridge_runtime.runtime._cli._args;"
        " sys.stdout.write('\\n'.join(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(done.stdout.splitlines())
    for heavy in HEAVY:
        assert heavy not in loaded, heavy
