"""A frame tap: an observer told of every frame a connection sends and receives.

Test tools and debuggers see the exact frames that cross one cartridge connection (the
start-up, calls, credit, heartbeats, peer calls, and frames nobody owns) without a second
host of their own. A tap is chosen when the connection is made, so a connection without one
pays nothing per frame: its send and route functions are the plain ones.
"""

from __future__ import annotations

from typing import Protocol

from ...protocol import Frame

__all__ = ("FrameTap",)


class FrameTap(Protocol):
    """Told of every frame of a connection, in order, before it is acted on.

    Received frames carry the seq the cartridge gave them; sent frames are seen as queued,
    before the outbox numbers them. A tap must not block or raise: it runs on the reader's
    and the senders' paths.
    """

    def on_received(self, connection: str, frame: Frame) -> None:
        """``frame`` came from the cartridge ``connection`` (before it is routed)."""

    def on_sent(self, connection: str, frame: Frame) -> None:
        """``frame`` is being queued for the cartridge ``connection``."""
