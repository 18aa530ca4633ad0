"""Media detection of input files: the media URN a file is, and the input set a list of
files, folders and globs makes.

Rules (chapter 15 of the protocol spec):

1. A declared media URN wins; nothing is read (DET-1).
2. Otherwise the extension proposes and the first :data:`SNIFF_BYTES` bytes confirm or correct
   it (DET-3, DET-6, DET-7); a file is never read further, whatever its size.
3. Several files, or any folder or glob, make a sequence input (DET-10).

The answers are :class:`~cartridge_runtime.urn.MediaUrn` values, not texts: the planner compares
a source with each cap's ``in=`` by conformance, which is a method of the value, and ``str()``
gives the canonical text wherever text is wanted. This module is the thin IO shell; the
decision itself is :func:`~._detect_rules.decide` over :func:`~._detect_sniff.sniff`, both pure.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import attrs

from ..urn import MediaUrn, UrnError
from ._detect_errors import (
    InputError,
    InputNotFound,
    InputUnreadable,
    InvalidDeclaredMedia,
    InvalidGlob,
    NoFilesMatched,
    NoInputs,
)
from ._detect_expand import expand
from ._detect_rules import Decision, decide
from ._detect_sniff import SNIFF_BYTES, sniff

__all__ = (
    "SNIFF_BYTES",
    "Decision",
    "DetectedInput",
    "InputSet",
    "detect_media",
    "detect_file",
    "detect_bytes",
    "expand_inputs",
    "resolve_inputs",
    "InputError",
    "NoInputs",
    "InputNotFound",
    "InputUnreadable",
    "InvalidGlob",
    "NoFilesMatched",
    "InvalidDeclaredMedia",
)


@attrs.frozen(kw_only=True)
class DetectedInput:
    """One input file and the media URN it was found to be.

    :ivar path: the file (absolute when it came from a folder or a glob).
    :ivar media: its media URN.
    :ivar decided_by: how ``media`` was decided.
    :ivar size: its size in bytes when it was looked at.
    """

    path: Path
    media: MediaUrn
    decided_by: Decision
    size: int

    @property
    def is_list(self) -> bool:
        """Whether the file holds a list (its URN's ``list`` marker: CSV, a JSON array...)."""
        return self.media.is_list()

    @property
    def is_record(self) -> bool:
        """Whether the file holds records (its URN's ``record`` marker)."""
        return self.media.is_record()


@attrs.frozen(kw_only=True)
class InputSet:
    """The files a list of arguments names, each detected.

    :ivar files: the files, sorted by path.
    :ivar is_sequence: whether the input is a sequence of values (DET-10): more than one file,
        or any folder or glob argument (which names a set, however many files it holds).
    """

    files: tuple[DetectedInput, ...]
    is_sequence: bool

    @property
    def common_media(self) -> MediaUrn | None:
        """The media URN every file shares (all equivalent), or ``None`` for a mixed set."""
        first = self.files[0].media
        if all(f.media.is_equivalent(first) for f in self.files[1:]):
            return first
        return None

    @property
    def paths(self) -> tuple[Path, ...]:
        """The files' paths, in order."""
        return tuple(f.path for f in self.files)


def _declared(declared: str | MediaUrn) -> MediaUrn:
    if isinstance(declared, MediaUrn):
        return declared
    try:
        return MediaUrn.parse(declared)
    except UrnError as exc:
        raise InvalidDeclaredMedia(str(declared), str(exc)) from exc


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    """An open descriptor on ``path`` and its status, refusing anything but a regular file (a
    FIFO or a device would block or never end)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputNotFound(path) from None
    except IsADirectoryError:
        raise InputUnreadable(path, "it is a folder, not a file") from None
    except OSError as exc:
        raise InputUnreadable(path, exc.strerror or str(exc)) from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputUnreadable(path, f"it is {what}")
    return fd, info


def _read_head(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of an open file (a short read is retried until
    the limit or the end of the file)."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        try:
            block = os.read(fd, left)
        except InterruptedError:
            continue
        if not block:
            break
        parts.append(block)
        left -= len(block)
    return b"".join(parts)


def detect_bytes(name: str, head: bytes, *, whole: bool) -> tuple[MediaUrn, Decision]:
    """The media URN of a file called ``name`` whose first bytes are ``head`` (``whole``: all
    of it), and how it was decided (DET-6, DET-7). Pure: for content already in memory."""
    media, decision = decide(name, sniff(head[:SNIFF_BYTES], whole=whole))
    return MediaUrn.parse(media), decision


def detect_file(
    path: str | os.PathLike[str], *, declared: str | MediaUrn | None = None
) -> DetectedInput:
    """Detect one file (DET-1 to DET-7), reading at most :data:`SNIFF_BYTES` of it.

    :param declared: the file's media URN as the caller knows it: it wins, and the file is only
        checked to exist.
    :raises InputNotFound: the file does not exist.
    :raises InputUnreadable: it cannot be opened or read, or it is not a regular file.
    :raises InvalidDeclaredMedia: ``declared`` is not a media URN.
    """
    path = Path(path)
    if declared is not None:
        media = _declared(declared)
        try:
            info = path.stat()
        except FileNotFoundError:
            raise InputNotFound(path) from None
        except OSError as exc:
            raise InputUnreadable(path, exc.strerror or str(exc)) from exc
        if stat.S_ISDIR(info.st_mode):
            raise InputUnreadable(path, "it is a folder, not a file")
        return DetectedInput(
            path=path, media=media, decided_by=Decision.DECLARED, size=info.st_size
        )
    fd, info = _open_regular(path)
    try:
        head = _read_head(fd, SNIFF_BYTES)
    except OSError as exc:
        raise InputUnreadable(path, exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)
    media, decision = detect_bytes(path.name, head, whole=len(head) >= info.st_size)
    return DetectedInput(path=path, media=media, decided_by=decision, size=info.st_size)


def detect_media(
    path: str | os.PathLike[str], *, declared: str | MediaUrn | None = None
) -> MediaUrn:
    """The media URN a file is: ``declared`` if given, else its extension confirmed or
    corrected by its first :data:`SNIFF_BYTES` bytes.

    :raises InputError: see :func:`detect_file`.
    """
    return detect_file(path, declared=declared).media


def _arguments(
    value: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> Iterable[str | os.PathLike[str]]:
    """One argument given alone, as a list of one."""
    return [value] if isinstance(value, str | os.PathLike) else value


def expand_inputs(
    paths_or_globs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> tuple[Path, ...]:
    """The files that file, folder and glob arguments name (DET-8): sorted, de-duplicated,
    OS junk skipped in folders and globs. A ``str`` with ``*``, ``?`` or ``[`` that is not an
    existing path is a glob; a ``Path`` never is. One argument may be given alone.

    :raises NoInputs: no argument.
    :raises InputNotFound: a file or folder argument does not exist.
    :raises InputUnreadable: a folder cannot be listed.
    :raises InvalidGlob: a glob with unbalanced brackets.
    :raises NoFilesMatched: a glob or folder that leaves no file.
    """
    return expand(_arguments(paths_or_globs))[0]


def resolve_inputs(
    paths_or_globs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    declared: str | MediaUrn | None = None,
) -> InputSet:
    """Expand the arguments (:func:`expand_inputs`) and detect every file (:func:`detect_file`);
    ``declared`` applies to every file.

    :raises InputError: as :func:`expand_inputs` and :func:`detect_file`.
    """
    paths, grouped = expand(_arguments(paths_or_globs))
    media = None if declared is None else _declared(declared)
    files = tuple(detect_file(path, declared=media) for path in paths)
    return InputSet(files=files, is_sequence=grouped or len(files) > 1)
