"""The hold a connection's pump keeps while it dispatches one block of frames.

A pump holds its own outbox while it dispatches a block, so that the frames the block makes
it queue (CREDIT, replies) leave together in one write after it. Frames it forwards to
*another* end (a peer link's, a relay link's) go to that end's outbox, which would otherwise
schedule a loop callback to write them one turn later: :meth:`BlockHold.batch` holds that
outbox too, from the first frame forwarded to it, and the end of the block releases it, so
they also leave in one write right after the block, without that extra loop turn.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ("BlockHold", "Holdable")


class Holdable(Protocol):
    """What can be held: an outbox, or an end that holds its outbox."""

    def hold(self) -> None: ...

    def release(self) -> None: ...


class BlockHold:
    """A pump's hold (see the module docstring); ``own``: the outbox always held."""

    __slots__ = ("_depth", "_others", "_own")

    def __init__(self, own: Holdable | None = None) -> None:
        self._own = own
        self._depth = 0
        self._others: list[Holdable] = []

    def hold(self) -> None:
        self._depth += 1
        if self._own is not None:
            self._own.hold()

    def release(self) -> None:
        if self._own is not None:
            self._own.release()
        self._depth -= 1
        if not self._depth and self._others:
            others, self._others = self._others, []
            for other in others:
                other.release()

    def batch(self, other: Holdable) -> None:
        """Frames are about to be queued on ``other`` while a block is dispatched: hold it
        until the block ends (once per block); outside a block, nothing to do."""
        if self._depth and other not in self._others:
            other.hold()
            self._others.append(other)
