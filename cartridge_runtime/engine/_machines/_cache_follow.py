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

__all__ = ("FOLLOW_WAIT", "Leader", "Follower")

#: Seconds a follower waits for bytes its leader was handed before it stops following.
FOLLOW_WAIT: Final = 30.0
#: Bytes per read when a follower copies the prefix it skipped.
_COPY_PIECE: Final = 1 << 20


class Leader:
    """How far one stored ``bytes`` stream got, for the streams that may repeat it.

    ``handed`` counts the bytes the call's thread gave the writer; ``written`` those that are
    in ``path`` (the file holding them: the stream's own temporary file, or, for a stream that
    itself follows, its leader's); ``digest`` is set when the stream ended.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.handed = 0
        self.written = 0
        self.path: Path | None = None
        self.ended = False
        self.broken = False  #: the stream stopped being a source (it failed, or diverged)
        self.digest: Any = None

    def at(self, path: Path) -> None:
        with self.cond:
            self.path = path
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

    def match(self, piece: Any) -> bool:
        """Whether ``piece`` equals the leader's bytes at this offset (then nothing is written
        for it); False: the follower must stop following."""
        view = memoryview(piece).cast("B")
        need = self.matched + view.nbytes
        lead = self.leader
        with lead.cond:
            if lead.broken or (lead.ended and lead.written < need) or lead.handed < need:
                return False
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
