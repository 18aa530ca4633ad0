"""Paths the commands are given, checked before anything is started.

A path mistake is a usage error (one ``error:`` line, exit 2) found before any cartridge is
spawned: a directory given as a cartridge, an ``--output-dir`` that names a file, an output
file in a place that cannot be written. Each function returns the problem in words, or
``None`` when the path will do; the commands decide how to report it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ("cartridge_problem", "output_dir_problem", "output_file_problem")


def cartridge_problem(target: str) -> str | None:
    """Why ``target`` cannot be started as a cartridge: a directory, or nothing at all (a
    bare name is looked up on ``PATH``)."""
    path = Path(target)
    if path.is_dir():
        return f"cartridge {target} is a directory (give a cartridge script or program)"
    if not path.exists() and (os.sep in target or shutil.which(target) is None):
        return f"cartridge not found: {target}"
    return None


def _existing_ancestor(path: Path) -> Path:
    here = path.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _room_problem(path: Path, option: str, room: Path) -> str | None:
    """Why nothing can be made at ``path``, whose nearest existing ancestor is ``room``."""
    if not room.is_dir():
        return f"{option} {path}: {room} is not a directory"
    if not os.access(room, os.W_OK | os.X_OK):
        return f"{option} {path}: {room} is not writable"
    return None


def output_dir_problem(path: Path, option: str = "--output-dir") -> str | None:
    """Why ``path`` cannot hold the outputs: a file, or a folder that cannot be written or
    made."""
    if path.exists():
        if not path.is_dir():
            return f"{option} {path} is not a directory"
        return _room_problem(path, option, path)
    return _room_problem(path, option, _existing_ancestor(path))


def output_file_problem(path: Path, option: str = "--output") -> str | None:
    """Why an output cannot be written to ``path``: a directory, or a folder that cannot be
    written or made."""
    if path.is_dir():
        return f"{option} {path} is a directory"
    return _room_problem(path, option, _existing_ancestor(path.parent))
