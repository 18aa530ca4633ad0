"""File, folder and glob arguments expanded to a sorted list of files, OS junk skipped.

Rules (chapter 15 of the protocol spec):

1. A file argument is itself (even a junk name: it was asked for); a folder is every regular
   file under it, walked to :data:`MAX_DEPTH` levels, each real folder once; an argument
   holding ``*``, ``?`` or ``[`` is a glob whose matching regular files count (DET-8).
2. Folders and globs skip OS junk: :data:`JUNK_FILES`, ``._*`` AppleDouble files, ``~$*``
   lock files, editor and backup suffixes, and the folders of :data:`JUNK_FOLDERS` (DET-8).
3. The answer is de-duplicated by real path and sorted by absolute path; a missing path, a
   bad glob, a glob or folder that leaves nothing are typed errors (DET-8, DET-9).
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from ._detect_errors import InputNotFound, InputUnreadable, InvalidGlob, NoFilesMatched, NoInputs

__all__ = ("JUNK_FILES", "JUNK_FOLDERS", "MAX_DEPTH", "expand", "is_glob", "is_junk_file")

#: Folder levels walked below a folder argument: deeper trees are cut, not an error, so a
#: pathological tree cannot hold the walk forever.
MAX_DEPTH: Final = 100

#: File names operating systems and file managers leave behind.
JUNK_FILES: Final = frozenset(
    {
        ".DS_Store",
        ".localized",
        ".AppleDouble",
        ".LSOverride",
        ".apdisk",
        ".VolumeIcon.icns",
        ".com.apple.timemachine.donotpresent",
        "Icon\r",
        "Thumbs.db",
        "Thumbs.db:encryptable",
        "ehthumbs.db",
        "ehthumbs_vista.db",
        "desktop.ini",
        ".directory",
    }
)
#: Prefixes of junk names: AppleDouble resource forks, Office lock files.
_JUNK_PREFIXES: Final = ("._", "~$", ".~lock.")
#: Suffixes of temporary, swap and backup files.
_JUNK_SUFFIXES: Final = (
    "~",
    ".tmp",
    ".temp",
    ".swp",
    ".swo",
    ".swn",
    ".bak",
    ".backup",
    ".orig",
    ".crdownload",
    ".part",
)
#: Folders that never hold a user's inputs: OS metadata, version control, caches.
JUNK_FOLDERS: Final = frozenset(
    {
        "__MACOSX",
        ".Spotlight-V100",
        ".Trashes",
        ".fseventsd",
        ".TemporaryItems",
        ".DocumentRevisions-V100",
        "$RECYCLE.BIN",
        "System Volume Information",
        ".git",
        ".svn",
        ".hg",
        ".bzr",
        "__pycache__",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".idea",
        ".vscode",
    }
)


def is_junk_file(name: str) -> bool:
    """Whether a file of this name is OS or editor junk (DET-8)."""
    return (
        name in JUNK_FILES
        or name.startswith(_JUNK_PREFIXES)
        or name.lower().endswith(_JUNK_SUFFIXES)
    )


def is_glob(argument: str) -> bool:
    """Whether an argument is a glob pattern (it holds ``*``, ``?`` or ``[``)."""
    return any(c in argument for c in "*?[")


def _walk(folder: Path, found: list[Path], seen: set[str], depth: int) -> None:
    real = os.path.realpath(folder)
    if real in seen or depth > MAX_DEPTH:
        return
    seen.add(real)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise InputUnreadable(folder, exc.strerror or str(exc)) from exc
    for entry in entries:
        try:
            if entry.is_dir():
                if entry.name not in JUNK_FOLDERS:
                    _walk(Path(entry.path), found, seen, depth + 1)
            elif entry.is_file() and not is_junk_file(entry.name):
                found.append(Path(entry.path))
        except OSError:
            continue  # vanished or unreadable between listing and looking: not an input


def _one(argument: str | os.PathLike[str]) -> tuple[list[Path], bool]:
    """The files of one argument, and whether it was a group (a folder or a glob)."""
    text = os.fspath(argument)
    if isinstance(argument, str) and is_glob(text) and not os.path.exists(text):
        if text.count("[") != text.count("]"):
            raise InvalidGlob(text, "unbalanced '[' and ']'")
        pattern = os.path.expanduser(text)
        matches = []
        for match in sorted(glob.glob(pattern, recursive=True)):
            path = Path(match)
            if path.is_file() and not is_junk_file(path.name) and not _in_junk_folder(path):
                matches.append(path)
        if not matches:
            raise NoFilesMatched(text)
        return matches, True
    path = Path(os.path.expanduser(text))
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputNotFound(path) from None
    except OSError as exc:
        raise InputUnreadable(path, exc.strerror or str(exc)) from exc
    if stat.S_ISDIR(info.st_mode):
        found: list[Path] = []
        _walk(path, found, set(), 0)
        if not found:
            raise NoFilesMatched(text)
        return found, True
    return [path], False


def _in_junk_folder(path: Path) -> bool:
    return any(part in JUNK_FOLDERS for part in path.parent.parts)


def expand(arguments: Iterable[str | os.PathLike[str]]) -> tuple[tuple[Path, ...], bool]:
    """Every file the arguments name (DET-8), absolute, de-duplicated by real path and sorted;
    and whether any argument was a folder or a glob.

    :raises NoInputs: no argument.
    :raises InputNotFound: a file or folder argument does not exist.
    :raises InputUnreadable: a folder cannot be listed, or a path cannot be looked at.
    :raises InvalidGlob: a glob with unbalanced brackets.
    :raises NoFilesMatched: a glob or a folder that leaves no file.
    """
    arguments = list(arguments)
    if not arguments:
        raise NoInputs()
    by_real: dict[str, Path] = {}
    grouped = False
    for argument in arguments:
        files, group = _one(argument)
        grouped = grouped or group
        for path in files:
            by_real.setdefault(os.path.realpath(path), path.absolute())
    return tuple(sorted(by_real.values())), grouped
