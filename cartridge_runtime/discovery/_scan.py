"""Finding cartridges on disk: what can be run, and what cannot and why. No process starts here.

Rules (chapter 15 of the protocol spec):

1. The root's own files: a ``.py`` script that holds a cartridge, a ``.js`` script, an
   executable (DSC-2).
2. Below the root: every folder holding a ``cartridge.json`` is a version folder; its parent is
   the cartridge's name folder, whose newest version is the candidate (DSC-3, DSC-6).
3. A managed tree ``{slug}/v{N}/{channel}/{name}/{version}`` is held to its folders: the channel
   folder names the record's channel, ``dev`` holds only records with no registry, another
   slug only records of the registry its ``charter.json`` anchors (DSC-7).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Final

import attrs

from ._install import (
    MAX_RECORD_BYTES,
    InstallRecordError,
    entry_escapes,
    parse_install_record,
    version_key,
)
from ._model import InstallRecord, LayoutKind, RefusalKind, RefusedCartridge

__all__ = ("Candidate", "scan", "RECORD_FILE")

#: The install record's file name in a version folder.
RECORD_FILE: Final = "cartridge.json"
#: Folder levels below the root searched for version folders: a managed tree's are five deep.
MAX_SCAN_DEPTH: Final = 6
#: Bytes of a ``.py`` file read to decide whether it holds a cartridge.
SCRIPT_PEEK: Final = 64 * 1024
#: What a Python cartridge script holds: a runtime, and a main guard that serves it.
_RUNTIME_MARK: Final = re.compile(rb"\bCartridgeRuntime\b|\bcartridge_runtime\b")
_MAIN_MARK: Final = re.compile(rb"__name__\s*==\s*['\"]__main__['\"]")
#: Folders never searched: version control, caches, OS metadata.
_SKIPPED_FOLDERS: Final = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", "__MACOSX", ".mypy_cache", ".venv"}
)
_JUNK_FILES: Final = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})
_MANAGED_VERSION: Final = re.compile(r"v\d+")
_CHANNELS: Final = ("release", "nightly")
_DEV_SLUG: Final = "dev"


@attrs.frozen(kw_only=True)
class Candidate:
    """Something that can be started to read its manifest.

    :ivar record_file: the ``cartridge.json`` (installed layout), part of the cache key.
    """

    layout: LayoutKind
    where: Path
    entry: Path
    command: tuple[str, ...]
    install: InstallRecord | None = None
    record_file: Path | None = None


def command_for(entry: Path) -> tuple[str, ...]:
    """The argv that runs an entry: ``.py`` with this interpreter, ``.js`` with node, anything
    else as itself (DSC-2)."""
    suffix = entry.suffix.lower()
    if suffix == ".py":
        return (sys.executable, str(entry))
    if suffix == ".js":
        return (shutil.which("node") or "node", str(entry))
    return (str(entry),)


def _is_executable(info: os.stat_result) -> bool:
    if os.name != "posix":
        return True  # no execute bit: what runs is decided by the extension
    return bool(info.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def _holds_cartridge(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(SCRIPT_PEEK)
    except OSError:
        return False
    return bool(_RUNTIME_MARK.search(head) and _MAIN_MARK.search(head))


def _root_file(path: Path, info: os.stat_result) -> Candidate | None:
    """The root-level file as a candidate, or ``None`` when it is not a cartridge (DSC-2)."""
    name = path.name
    if name.startswith(".") or name in _JUNK_FILES or not stat.S_ISREG(info.st_mode):
        return None
    suffix = path.suffix.lower()
    if suffix == ".py":
        layout = LayoutKind.SCRIPT if _holds_cartridge(path) else None
    elif suffix == ".js":
        layout = LayoutKind.SCRIPT
    else:
        layout = LayoutKind.EXECUTABLE if _is_executable(info) else None
    if layout is None:
        return None
    return Candidate(layout=layout, where=path, entry=path, command=command_for(path))


class _Refusal(Exception):
    def __init__(self, kind: RefusalKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def _read_record(version_dir: Path) -> tuple[InstallRecord, Path]:
    record_file = version_dir / RECORD_FILE
    try:
        with record_file.open("rb") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        raise _Refusal(RefusalKind.MANIFEST_INVALID, f"no {RECORD_FILE} in it") from None
    except OSError as exc:
        raise _Refusal(
            RefusalKind.MANIFEST_INVALID, f"{RECORD_FILE} cannot be read: {exc.strerror or exc}"
        ) from None
    try:
        return parse_install_record(data), record_file
    except InstallRecordError as exc:
        raise _Refusal(RefusalKind.MANIFEST_INVALID, f"{RECORD_FILE}: {exc}") from None


def _charter_anchor(slug_dir: Path) -> str:
    """The anchor a registry folder's stored charter names (DSC-7)."""
    try:
        charter = json.loads((slug_dir / "charter.json").read_bytes())
    except FileNotFoundError:
        raise _Refusal(
            RefusalKind.MISPLACED, f"the registry folder {slug_dir.name!r} has no charter.json"
        ) from None
    except (OSError, ValueError) as exc:
        raise _Refusal(
            RefusalKind.MISPLACED,
            f"the registry folder {slug_dir.name!r} has a charter that does not read: {exc}",
        ) from None
    anchor = charter.get("anchor") if isinstance(charter, dict) else None
    if not isinstance(anchor, str) or charter.get("slug") != slug_dir.name:
        raise _Refusal(
            RefusalKind.MISPLACED,
            f"the charter of {slug_dir.name!r} names no anchor, or another folder",
        )
    return anchor


def _check_placement(record: InstallRecord, managed: tuple[Path, str] | None) -> None:
    """DSC-7: a managed tree's channel and registry folders agree with the record."""
    if managed is None:
        return
    slug_dir, channel = managed
    if record.channel != channel:
        raise _Refusal(
            RefusalKind.MISPLACED,
            f"it declares channel {record.channel!r} but sits in the {channel!r} folder",
        )
    if slug_dir.name == _DEV_SLUG:
        if record.registry_url is not None:
            raise _Refusal(
                RefusalKind.MISPLACED,
                f"registry_url {record.registry_url!r} in the 'dev' folder (dev installs have none)",
            )
        return
    anchor = _charter_anchor(slug_dir)
    if record.registry_url != anchor:
        raise _Refusal(
            RefusalKind.MISPLACED,
            f"registry_url {record.registry_url!r} in the folder of the registry {anchor!r}",
        )


def _installed(version_dir: Path, managed: tuple[Path, str] | None) -> Candidate:
    """A version folder as a candidate (DSC-4, DSC-5, DSC-7, DSC-8)."""
    record, record_file = _read_record(version_dir)
    _check_placement(record, managed)
    if record.installed_from == "bundle":
        raise _Refusal(
            RefusalKind.BUNDLE_UNPROVEN,
            "it is marked as bundled with an application, and no bundle manifest proves it here",
        )
    if entry_escapes(record.entry):
        raise _Refusal(RefusalKind.ENTRY_ESCAPES, f"entry {record.entry!r} leaves its folder")
    entry = version_dir / record.entry
    real_dir = os.path.realpath(version_dir)
    if os.path.commonpath([real_dir, os.path.realpath(entry)]) != real_dir:
        raise _Refusal(RefusalKind.ENTRY_ESCAPES, f"entry {record.entry!r} links out of its folder")
    try:
        info = entry.stat()
    except OSError:
        raise _Refusal(
            RefusalKind.ENTRY_MISSING, f"entry {record.entry!r} does not exist"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise _Refusal(RefusalKind.ENTRY_MISSING, f"entry {record.entry!r} is not a file")
    if not _is_executable(info):
        raise _Refusal(
            RefusalKind.ENTRY_NOT_EXECUTABLE, f"entry {record.entry!r} is not executable"
        )
    return Candidate(
        layout=LayoutKind.INSTALLED,
        where=version_dir,
        entry=entry,
        command=command_for(entry),
        install=record,
        record_file=record_file,
    )


def _subdirs(folder: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            if entry.is_dir() and entry.name not in _SKIPPED_FOLDERS:
                found.append(Path(entry.path))
        except OSError:
            continue
    return found


class _Scanner:
    """One walk of a root: candidates and refusals in the order met."""

    def __init__(self) -> None:
        self.candidates: list[Candidate] = []
        self.refused: list[RefusedCartridge] = []

    def refuse(self, path: Path, refusal: _Refusal, name: str | None, version: str | None) -> None:
        self.refused.append(
            RefusedCartridge(
                path=path, kind=refusal.kind, reason=refusal.reason, name=name, version=version
            )
        )

    def name_folder(
        self, name: str, where: Path, versions: list[Path], managed: tuple[Path, str] | None
    ) -> None:
        """The newest of one cartridge's version folders (DSC-6)."""
        if not versions:
            self.refuse(
                where,
                _Refusal(RefusalKind.NO_VERSION, "a cartridge folder with no version folder"),
                name,
                None,
            )
            return
        versions = sorted(versions, key=lambda p: version_key(p.name), reverse=True)
        newest = versions[0]
        try:
            self.candidates.append(_installed(newest, managed))
        except _Refusal as refusal:
            self.refuse(newest, refusal, name, newest.name)
        for older in versions[1:]:
            self.refuse(
                older,
                _Refusal(RefusalKind.SUPERSEDED, f"version {newest.name} is newer"),
                name,
                older.name,
            )

    def managed_tree(self, slug_dir: Path) -> bool:
        """Scan ``{slug}/v{N}/{channel}/{name}/{version}`` when ``slug_dir`` is one (DSC-7)."""
        regimes = [d for d in _subdirs(slug_dir) if _MANAGED_VERSION.fullmatch(d.name)]
        channels = [c for r in regimes for c in _subdirs(r) if c.name in _CHANNELS]
        if not channels:
            return False
        for channel_dir in channels:
            for name_dir in _subdirs(channel_dir):
                managed = (slug_dir, channel_dir.name)
                self.name_folder(name_dir.name, name_dir, _subdirs(name_dir), managed)
        return True

    def folder(self, folder: Path, depth: int) -> None:
        """Version folders anywhere below ``folder`` (DSC-3): those side by side are grouped
        by the name their record gives (a record that does not read is a group of its own)."""
        if depth > MAX_SCAN_DEPTH:
            return
        groups: dict[str, list[Path]] = {}
        for child in _subdirs(folder):
            if (child / RECORD_FILE).is_file():
                try:
                    key = "name:" + _read_record(child)[0].name
                except _Refusal:
                    key = "path:" + str(child)
                groups.setdefault(key, []).append(child)
            elif not (depth == 0 and self.managed_tree(child)):
                self.folder(child, depth + 1)
        for key, versions in groups.items():
            kind, _, name = key.partition(":")
            if kind == "path":
                # A record that does not read: the name folder's name, if there is one.
                name = folder.name if depth > 0 else versions[0].name
            self.name_folder(name, versions[0].parent, versions, None)


def scan(root: Path) -> tuple[list[Candidate], list[RefusedCartridge]]:
    """Every cartridge under ``root`` that can be started, and every one refused (DSC-1 to
    DSC-8). ``root`` is an existing folder; one holding a ``cartridge.json`` is a version
    folder on its own."""
    scanner = _Scanner()
    if (root / RECORD_FILE).is_file():
        try:
            scanner.candidates.append(_installed(root, None))
        except _Refusal as refusal:
            scanner.refuse(root, refusal, None, root.name)
        return scanner.candidates, scanner.refused
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        path = Path(entry.path)
        try:
            info = path.stat()
        except OSError:
            continue  # a dangling link or a file gone since the listing
        if stat.S_ISREG(info.st_mode):
            candidate = _root_file(path, info)
            if candidate is not None:
                scanner.candidates.append(candidate)
    scanner.folder(root, 0)
    return scanner.candidates, scanner.refused
