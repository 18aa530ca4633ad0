"""The source distribution carries everything the compiled codec needs, and builds it.

Builds an sdist of this checkout with PyPA ``build`` (an isolated build, as a user's would
be), then a wheel from that sdist alone, and looks inside both: the compiled fast paths must
be in the wheel (a header missing from the sdist would fail the compile, and the optional
extension would be silently left out).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _build(kind: str, source: Path, out: Path) -> Path:
    """Run ``python -m build --<kind>`` on ``source`` (a tree or an sdist) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = out.iterdir()
    return built


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None,
    reason="no C compiler: the wheel is pure Python by design",
)
def test_a_wheel_built_from_the_sdist_has_the_compiled_codec(tmp_path: Path) -> None:
    sdist = _build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    sources = ("_speedups.c", "_frame_read.c", "_frame_write.c", "_frames.h")
    for source in (*sources, "_cbor_read.c", "_cbor_write.c", "_cbor.h"):
        assert f"{top}/cartridge_runtime/protocol/_csrc/{source}" in names, source
    assert f"{top}/cartridge_runtime/protocol/_speedups.pyi" in names
    assert not any(n.endswith(".so") for n in names), "a built object leaked into the sdist"

    wheel = _build("wheel", sdist, tmp_path / "wheel")
    with zipfile.ZipFile(wheel) as zf:
        members = zf.namelist()
    compiled = [m for m in members if m.startswith("cartridge_runtime/protocol/_speedups.")]
    assert any(m.endswith((".so", ".pyd")) for m in compiled), compiled
    assert "cartridge_runtime/py.typed" in members
