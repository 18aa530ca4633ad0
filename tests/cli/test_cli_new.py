"""``cartridge new NAME [--dir DIR]``: the generated cartridge runs, its generated test passes,
and it passes the conformance kit untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _bundled import assert_conformant

from cartridge_runtime.cli.new import ScaffoldError, render, scaffold
from cartridge_runtime.manifest import Manifest, validate_manifest
from cartridge_runtime.urn import CapUrn

TIMEOUT = 120.0


def _cartridge_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One scaffold made through the real command line, shared by the tests below."""
    base = tmp_path_factory.mktemp("new")
    done = _cartridge_cli("new", "Demo-Tool", "--dir", str(base / "out"), cwd=base)
    assert done.returncode == 0, done.stderr
    assert "Demo-Tool.py" in done.stdout
    return base / "out"


def test_new_writes_the_cartridge_and_its_test(generated: Path) -> None:
    assert sorted(p.name for p in generated.iterdir()) == [
        "Demo-Tool.py",
        "pytest.ini",
        "test_Demo-Tool.py",
    ]


def test_existing_pytest_configuration_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = []\n")
    written = scaffold("mine", tmp_path)
    assert sorted(p.name for p in written) == ["mine.py", "test_mine.py"]
    assert not (tmp_path / "pytest.ini").exists()


def test_generated_cartridge_manifest_and_cli(generated: Path) -> None:
    script = generated / "Demo-Tool.py"
    done = subprocess.run(
        [sys.executable, str(script), "manifest"], capture_output=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    manifest = Manifest.from_json(done.stdout)
    validate_manifest(manifest)
    assert manifest.name == "Demo-Tool"
    for cap in manifest.all_caps():
        assert str(CapUrn.parse(cap.urn)) == cap.urn
    done = subprocess.run(
        [sys.executable, str(script), "shout"],
        input=b"make some noise",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == b"MAKE SOME NOISE"


def test_generated_test_passes(generated: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_Demo-Tool.py"],
        capture_output=True,
        text=True,
        cwd=generated,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    # The first run is quiet: the generated pytest.ini settles pytest-asyncio's options.
    assert "warning" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr


@pytest.mark.slow
def test_generated_cartridge_passes_the_conformance_kit(generated: Path) -> None:
    assert_conformant(generated / "Demo-Tool.py")


def test_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    scaffold("keep", tmp_path)
    (tmp_path / "keep.py").write_text("# mine\n")
    with pytest.raises(ScaffoldError, match="--force"):
        scaffold("keep", tmp_path)
    assert (tmp_path / "keep.py").read_text() == "# mine\n"
    scaffold("keep", tmp_path, force=True)
    assert "build_runtime" in (tmp_path / "keep.py").read_text()
    done = _cartridge_cli("new", "keep", "--dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert "refusing to overwrite" in done.stderr


@pytest.mark.parametrize("name", ["", "1abc", "has space", "a/b", "x" * 65, "dots.py"])
def test_refuses_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScaffoldError, match="invalid cartridge name"):
        scaffold(name, tmp_path)
    assert not any(tmp_path.iterdir())


def test_templates_are_package_data() -> None:
    text = render("cartridge.py.tmpl", "Abc")
    assert "__NAME__" not in text and "__TAG__" not in text
    assert "op=abc-shout" in text
    assert json.dumps("Abc") in text  # the manifest name keeps the given spelling
