"""Shared helpers for the engine tests: paths, the interop manifest, small engines."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "cartridges" / "interop.py"
RAW = ROOT / "tests" / "fixtures" / "raw_cartridge.py"
REFERENCE = ROOT / "tests" / "fixtures" / "capdag_cartridge.py"


@cache
def interop_caps() -> dict[str, str]:
    """Cap URN of each interop cap by its first alias, read from its manifest (CLI mode)."""
    out = subprocess.run(
        [sys.executable, str(INTEROP), "manifest"], capture_output=True, timeout=30, check=True
    )
    manifest = json.loads(out.stdout)
    return {
        cap["aliases"][0]: cap["urn"] for group in manifest["cap_groups"] for cap in group["caps"]
    }


def raw_env(mode: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["RAW_MODE"] = mode
    return env
