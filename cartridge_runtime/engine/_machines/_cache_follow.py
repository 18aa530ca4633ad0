"""A stored output that repeats the bytes of another being stored is not written twice.

A step that passes its input through (an echo, a format check, a step whose work changed
nothing) gives the bytes its producer gave, and both are stored: without care, the same blob is
written and hashed twice. Here a stream being stored (the follower) is compared, piece by
piece, with the stream its call's input came from while that one is stored too (the leader):
the leader's bytes are read back from its file (from the page cache: far cheaper than a write)
and, while they are equal, the follower writes and hashes nothing. If the follower ends equal
to the leader, its blob is the leader's; at the first difference it copies the prefix it
skipped from the leader's file (hashing it) and goes on writing as any stream does.

A follower never waits for bytes the leader has not been handed yet (the call's own thread
hands them over, and it may be waiting for this very writer), and waits at most
:data:`FOLLOW_WAIT` seconds for bytes it was handed: then it stops following.

A leader may also be complete before anything follows it: a run's input file (its digest known
from hashing it) or a blob a cache hit replays (:meth:`Leader.complete`). A stream that repeats
such a source writes and hashes nothing either; its blob is the source's, already in place for
a replayed blob, copied in by the kernel (``copy_file_range``, no pass through this process)
for an input file, which is never linked into the store: the user may change it in place. A
source file whose size, modification time or inode changed since it was hashed is not used:
the call stores nothing rather than a blob its name does not describe.

Threads: a :class:`Leader` is updated by its writer's thread and read by a follower's; both
sides go through its condition.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

__all__ = ("FOLLOW_WAIT", "Leader", "Follower", "file_stamp", "copy_file")

#: Seconds a follower waits for bytes its leader was handed before it stops following.
FOLLOW_WAIT: Final = 30.0
#: Bytes per read when a follower copies the prefix it skipped.
_COPY_PIECE: Final = 1 << 20


class Leader:
    """How far one stored ``bytes`` stream got, for the streams that may repeat it.

    ``handed`` counts the bytes the call's thread gave the writer; ``written`` those that are
    in ``path`` (the file holding them: the stream's own temporary file, or, for a stream that
    itself follows, its leader's); ``digest`` is set when the stream ended. ``external`` is the
    :func:`file_stamp` of ``path`` when that is a file outside the store (a run's input file).
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.handed = 0
        self.written = 0
        self.path: Path | None = None
        self.ended = False
        self.broken = False  #: the stream stopped being a source (it failed, or diverged)
        self.digest: Any = None
        self.external: tuple[int, ...] | None = None

    @classmethod
    def complete(
        cls, path: Path, size: int, digest: Any, external: tuple[int, ...] | None = None
    ) -> Leader:
        """A source whose ``size`` bytes are all in ``path`` already (see the module docstring)."""
        lead = cls()
        lead.path = path
        lead.handed = lead.written = size
        lead.ended = True
        lead.digest = digest
        lead.external = external
        return lead

    def at(self, path: Path, external: tuple[int, ...] | None = None) -> None:
        with self.cond:
            self.path = path
            self.external = external
            self.cond.notify_all()

    def advanced(self, n: int) -> None:
        with self.cond:
            self.written += n
            self.cond.notify_all()

    def end(self, digest: Any) -> None:
        with self.cond:
            self.ended = True
            self.digest = digest
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.broken = True
            self.cond.notify_all()


class Follower:
    """One stream compared with its leader's bytes (see the module docstring)."""

    def __init__(self, leader: Leader) -> None:
        self.leader = leader
        self.matched = 0
        self._fd: int | None = None
        self._buffer = bytearray()

    @property
    def source(self) -> Path | None:
        """The file holding the bytes matched so far."""
        return self.leader.path

    def unchanged(self) -> bool:
        """False when the bytes matched so far come from a file outside the store that changed
        since it was hashed (they may no longer be what the stream gave)."""
        external = self.leader.external
        if external is None or self.matched == 0:
            return True
        try:
            return file_stamp(self._fd if self._fd is not None else -1) == external
        except OSError:
            return False

    def match(self, piece: Any, *, wait: bool = True) -> bool:
        """Whether ``piece`` equals the leader's bytes at this offset (then nothing is written
        for it); False: the follower must stop following. ``wait=False`` never waits for the
        leader (False then also when its bytes are not written yet: ask again, waiting)."""
        view = memoryview(piece).cast("B")
        need = self.matched + view.nbytes
        lead = self.leader
        with lead.cond:
            if lead.broken or (lead.ended and lead.written < need) or lead.handed < need:
                return False
            if wait:
                lead.cond.wait_for(
                    lambda: lead.written >= need or lead.broken or lead.ended, timeout=FOLLOW_WAIT
                )
            if lead.broken or lead.written < need or lead.path is None:
                return False
            path = lead.path
        if len(self._buffer) != view.nbytes:
            self._buffer = bytearray(view.nbytes)  # pieces are mostly of one size: reused
        try:
            if self._fd is None:
                self._fd = os.open(path, os.O_RDONLY)
            got = os.preadv(self._fd, [self._buffer], self.matched)
        except OSError:
            return False
        # bytearray == buffer compares with memcmp (two memoryviews would go item by item).
        same = got == view.nbytes and self._buffer == view
        if same:
            self.matched = need
        return same

    def same_at_end(self) -> Any:
        """The leader's digest when this stream ended equal to it, else None."""
        lead = self.leader
        with lead.cond:
            if lead.ended and not lead.broken and lead.written == self.matched:
                return lead.digest
        return None

    def prefix(self) -> Iterator[bytes]:
        """The bytes matched so far, read back from the leader's file (kept readable by the
        open descriptor even once the leader renamed or removed it)."""
        if self.matched == 0:
            return
        if self._fd is None:
            raise OSError("the leader's file was never opened")
        done = 0
        while done < self.matched:
            block = os.pread(self._fd, min(_COPY_PIECE, self.matched - done), done)
            if not block:
                raise OSError("the leader's file is shorter than what was matched")
            done += len(block)
            yield block

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def file_stamp(file: int | Path) -> tuple[int, ...]:
    """What says a file is unchanged: its size, modification time, inode and device (of an
    open descriptor, or of a path).

    :raises OSError: it cannot be read.
    """
    info = os.fstat(file) if isinstance(file, int) else os.stat(file)
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)


def copy_file(source: Path, stamp: tuple[int, ...], target: int) -> bool:
    """Copy ``source`` into the open, empty file ``target`` in the kernel (``copy_file_range``;
    reads and writes where that is not allowed); False when ``source`` does not match
    ``stamp`` before or after the copy (it changed: what was copied may be neither version).

    :raises OSError: reading or writing failed.
    """
    fd = os.open(source, os.O_RDONLY)
    try:
        if file_stamp(fd) != stamp:
            return False
        size = stamp[0]
        done = 0
        in_kernel = hasattr(os, "copy_file_range")
        while done < size:
            if in_kernel:
                try:
                    n = os.copy_file_range(fd, target, size - done, done, done)
                except OSError:
                    if done:
                        raise
                    in_kernel = False  # another file system, or not allowed here
                    continue
            else:
                block = os.pread(fd, min(_COPY_PIECE, size - done), done)
                n = len(block) and os.pwrite(target, block, done)
            if n == 0:
                break
            done += n
        return done == size and file_stamp(fd) == stamp
    finally:
        os.close(fd)
