"""Every public module's ``__all__`` names exist, and nothing imports the reference."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

import pytest

PUBLIC = [
    "cartridge_runtime",
    "cartridge_runtime.protocol",
    "cartridge_runtime.urn",
    "cartridge_runtime.manifest",
    "cartridge_runtime.runtime",
    "cartridge_runtime.engine",
    "cartridge_runtime.testing",
    "cartridge_runtime.conformance",
    "cartridge_runtime.machine",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_names_resolve(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(module.__all__, tuple)
    assert len(set(module.__all__)) == len(module.__all__)
    for attr in module.__all__:
        assert getattr(module, attr) is not None, f"{name}.{attr}"


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    import cartridge_runtime

    with pytest.raises(AttributeError):
        cartridge_runtime.NoSuchThing  # noqa: B018


def test_package_never_imports_the_reference() -> None:
    root = pathlib.Path(__file__).resolve().parents[2] / "cartridge_runtime"
    offenders = [
        str(p)
        for p in root.rglob("*.py")
        if "import capdag" in p.read_text() or "from capdag" in p.read_text()
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "core",
    ["cartridge_runtime.protocol", "cartridge_runtime.machine, cartridge_runtime.machine._plan"],
)
def test_the_cores_are_sans_io(core: str) -> None:
    code = (
        f"import sys; import {core}; "
        "bad = [m for m in ('anyio', 'asyncio', 'trio', 'socket', 'subprocess') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
