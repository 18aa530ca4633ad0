"""Where this package keeps its per-user files, one rule for every room.

Everything the package writes for a user lives under one home: ``$CARTRIDGE_HOME`` when it is
set, else ``$XDG_CACHE_HOME/cartridge``, else ``~/.cache/cartridge``. Under it: ``runs/`` (run
records), ``steps/`` (the step cache) and ``manifests/`` (discovery's manifest cache). Setting
``CARTRIDGE_HOME`` therefore moves all of them at once, as a test or a sandbox wants.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("cartridge_home",)


def cartridge_home() -> Path:
    """The per-user home of this package's files (see the module docstring)."""
    home = os.environ.get("CARTRIDGE_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cartridge"
