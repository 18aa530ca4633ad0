"""The verbs every sans-IO connection core shares: bytes in, events out, bytes to send.

1. ``receive_data(data)`` feeds what the peer wrote; ``b""`` means the peer closed its side.
2. ``next_event()`` returns the next event, :data:`NEED_DATA` when more bytes are needed, or
   :data:`PEER_CLOSED` once the peer's end was read at a frame boundary.
3. ``data_to_send()`` returns every byte the core decided to send since the last call, each
   frame numbered by the core (TYP-3..TYP-6) and encoded, in order.

Theory of operation. Both :class:`~._host_conn.HostConnection` and
:class:`~._cartridge_conn.CartridgeConnection` hold one :class:`WireBytes` (composition): its
decoder turns bytes into frames for the core's frame-level entry point, and its queue holds
the frames the core sends, numbered by the core's :class:`~._seq.SeqAssigner`. The engine's
and the runtime's shells drive the same cores frame by frame over the shared IO plumbing (its
pump decodes, its outbox asks the core's numbering); these verbs are the whole-connection face
for anyone else, tests pairing two cores over memory first of all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final

from ._codec import encode_frame
from ._decoder import FrameDecoder
from ._frame import Frame
from ._seq import SeqAssigner

__all__ = ("NEED_DATA", "PEER_CLOSED", "NoEvent", "WireBytes")


class NoEvent(enum.Enum):
    """What :meth:`next_event` returns when there is no event."""

    #: Every complete frame was taken: feed more bytes.
    NEED_DATA = "need data"
    #: The peer closed its side and every frame before it was taken.
    PEER_CLOSED = "peer closed"


NEED_DATA: Final = NoEvent.NEED_DATA
PEER_CLOSED: Final = NoEvent.PEER_CLOSED


class WireBytes:
    """A core's bytes: a decoder for what arrives and the encoded frames it sends.

    :param seq: the core's numbering.
    :param max_frame: the negotiated max_frame (read whenever a frame is decoded or encoded).
    """

    __slots__ = ("_max_frame", "_out", "_seq", "decoder", "eof")

    def __init__(self, seq: SeqAssigner, max_frame: Callable[[], int]) -> None:
        self.decoder = FrameDecoder(max_frame())
        self._seq = seq
        self._max_frame = max_frame
        self._out: list[bytes] = []
        #: The peer closed its side (``b""`` was fed).
        self.eof = False

    def feed(self, data: bytes) -> None:
        """Bytes the peer wrote; ``b""`` is its end.

        :raises ProtocolError: the decoder already failed.
        """
        if not data:
            self.eof = True
        self.decoder.feed(data)

    def next_frame(self) -> Frame | None:
        """The next complete frame, or ``None``.

        :raises ProtocolError: the bytes are not a valid frame (also the end inside one).
        """
        decoder = self.decoder
        decoder.max_frame = self._max_frame()
        return decoder.next_frame()

    def end(self) -> NoEvent:
        """What :meth:`next_event` returns when no frame is left."""
        return PEER_CLOSED if self.eof else NEED_DATA

    def queue(self, frame: Frame) -> None:
        """Number ``frame`` and encode it onto the queue; a straggler (its flow ended) is
        dropped and counted by the numbering.

        :raises FrameEncodeError: the frame does not fit max_frame.
        """
        seq = self._seq.number(frame)
        if seq is not None:
            self._out.append(encode_frame(frame, self._max_frame(), seq))

    def take(self) -> bytes:
        """Everything queued, in order, and an empty queue."""
        out, self._out = self._out, []
        return b"".join(out)
