import subprocess
import sys


def test_cartridge_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "cartridge-runtime" in out.stdout
    assert "v6" in out.stdout
