"""The temporary files of a step cache store, and how ``gc`` tells a live writer's from a dead one's.

Rules (MCH-30):

1. Every temporary file a process writes into ``tmp/`` is named ``<owner>.<kind>.<random>``,
   where ``<owner>`` is a token of that process's store object. Before the first such file, the
   owner takes an exclusive ``flock`` on a file made under a pending name, then renames it to
   ``owner.<owner>.lock``: a lock file in place is locked from the moment it can be seen. The
   lock lasts as long as the store object (the operating system drops it when the process dies,
   SIGKILL included).
2. ``gc`` removes the files of an owner whose lock file is missing or can be locked (its process
   is gone: a writer interrupted mid-blob leaves its partial file behind), and never those of an
   owner whose lock it cannot take (a live run, in this process or another). Files that follow
   no owner (an older layout, a pending lock file) go by age only.

Where ``flock`` does not exist, no lock is taken and ``gc`` goes by age only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Final

try:
    import fcntl
except ImportError:  # not a POSIX system: files go by age only
    fcntl = None  # type: ignore[assignment]

__all__ = ("TempOwner", "sweep")

#: The lock file of an owner: ``owner.<token>.lock``.
_LOCK_PREFIX: Final = "owner."
_LOCK_SUFFIX: Final = ".lock"
#: A lock file before its rename into place.
_PENDING: Final = "pending."


def _lock_path(folder: Path, token: str) -> Path:
    return folder / f"{_LOCK_PREFIX}{token}{_LOCK_SUFFIX}"


def _release(fd: int, path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)


class TempOwner:
    """One store object's claim on its temporary files (module rule 1), taken lazily."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.token = secrets.token_hex(8)
        self._locked = False
        self._guard = threading.Lock()  # writer threads may make the first file

    def _claim(self) -> None:
        if fcntl is None:
            self._locked = True
            return
        handle, pending = tempfile.mkstemp(dir=self.folder, prefix=_PENDING)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            final = _lock_path(self.folder, self.token)
            os.replace(pending, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(pending)
            os.close(handle)
            raise
        weakref.finalize(self, _release, handle, final)
        self._locked = True

    def new_file(self, kind: str) -> tuple[IO[bytes], Path]:
        """A new temporary file of this owner, open for writing."""
        if not self._locked:
            with self._guard:
                if not self._locked:
                    self._claim()
        handle, name = tempfile.mkstemp(dir=self.folder, prefix=f"{self.token}.{kind}.")
        return os.fdopen(handle, "wb"), Path(name)


def _owner_alive(folder: Path, token: str, cache: dict[str, bool]) -> bool:
    """Whether ``token``'s lock is held; a dead owner's lock file is removed."""
    if token in cache:
        return cache[token]
    path = _lock_path(folder, token)
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        cache[token] = False  # no lock file: nobody owns these files any more
        return False
    try:
        assert fcntl is not None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        cache[token] = True  # held: a live store
        return True
    finally:
        os.close(fd)  # closing drops the lock this check may have taken
    with contextlib.suppress(OSError):
        path.unlink()
    cache[token] = False
    return False


def sweep(folder: Path, age: float) -> int:
    """Remove what :class:`TempOwner` rule 2 allows; the bytes freed."""
    freed = 0
    now = time.time()
    alive: dict[str, bool] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return 0
    for name in names:
        path = folder / name
        try:
            stat = path.stat()
        except OSError:
            continue
        token = _token_of(name)
        if fcntl is not None and token is not None:
            if _owner_alive(folder, token, alive) or name.startswith(_LOCK_PREFIX):
                continue  # a dead owner's lock file went with the check
        elif now - stat.st_mtime <= age:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            freed += stat.st_size
    return freed


def _token_of(name: str) -> str | None:
    """The owner token a temporary file's name carries, or None (no owner)."""
    if name.startswith(_LOCK_PREFIX) and name.endswith(_LOCK_SUFFIX):
        return name[len(_LOCK_PREFIX) : -len(_LOCK_SUFFIX)]
    head, dot, _ = name.partition(".")
    if dot and len(head) == 16 and all(c in "0123456789abcdef" for c in head):
        return head
    return None
