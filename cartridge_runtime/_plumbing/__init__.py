"""The IO plumbing both ends of a Bifaci connection share: bytes in, frames out, and back.

- :mod:`._outbox`: :class:`FrameOutbox`, the one outbound frame queue and its writer (each
  frame numbered by its connection core, drops counted, gathering writes without copies of
  large payloads,
  synchronous non-blocking flushes, hold/release, withdraw, a writer task woken only when
  needed), with the per-side knobs as constructor parameters.
- :mod:`._pump`: :class:`FramePump`, the one reader pump (reads sized by the decoder, blocks fed
  borrowed, one dispatch callback, a pause while the outbound queue is full, EOF and decoder
  errors reported).
- :mod:`._backend`: every asyncio-specific fast path (the persistent reader callback, the
  ``call_soon`` flush), each with a plain anyio fallback (trio).
- :mod:`._fd`: non-blocking pipes on raw file descriptors (owned by the engine, borrowed by a
  cartridge).

Who uses what
-------------
- The cartridge's session (``runtime/_frames/_session.py``) holds a :class:`FramePump` with
  ``room=`` its outbox, reads the handshake with :meth:`FramePump.next_frame` and then runs
  the pump over its stdin (:class:`FdReceiveStream`, which reads from the loop's reader
  callback on asyncio). Its writer (``runtime/_frames/_writer.py``) is a :class:`FrameOutbox` that
  encodes at flush time with a frame bound (:attr:`EncodeAt.FLUSH`).
- The engine's connection (``engine/_connection/_shell.py``) holds a :class:`FrameOutbox` that encodes at
  queue time with no bound, attached to the instance's stdin once it is launched, and a
  :class:`FramePump` with ``hold=`` that outbox, run over the instance's ``stdout`` byte stream
  as the session runs it over its stdin (an :class:`FdReader` for a local subprocess, which
  reads from the loop's reader callback on asyncio).
"""

from ._backend import (
    Block,
    Cancellable,
    SoonCaller,
    Wake,
    event_factory,
    read_fd,
    soon_caller,
    wake_factory,
)
from ._fd import (
    IOV_MAX,
    PEER_GONE,
    PIPE_SIZE,
    FdReader,
    FdReceiveStream,
    FdSendStream,
    FdSink,
    FdWriter,
    grow_pipe,
    make_pipe,
)
from ._outbox import (
    SMALL_PAYLOAD,
    YIELD_BYTES,
    ByteSink,
    DropCounts,
    EncodeAt,
    FrameOutbox,
    OutboxCounts,
    StreamSink,
    sink_for,
)
from ._pump import READ_SIZE, BlockSource, FramePump, Hold, Room, StreamSource, source_for

__all__ = (
    # the outbound queue and writer
    "FrameOutbox",
    "EncodeAt",
    "ByteSink",
    "StreamSink",
    "sink_for",
    "DropCounts",
    "OutboxCounts",
    "SMALL_PAYLOAD",
    "YIELD_BYTES",
    # the reader pump
    "FramePump",
    "BlockSource",
    "StreamSource",
    "source_for",
    "Room",
    "Hold",
    "READ_SIZE",
    # the backend's fast paths
    "Block",
    "Cancellable",
    "SoonCaller",
    "read_fd",
    "soon_caller",
    "event_factory",
    "Wake",
    "wake_factory",
    # file descriptors
    "FdSink",
    "FdReader",
    "FdWriter",
    "FdReceiveStream",
    "FdSendStream",
    "grow_pipe",
    "make_pipe",
    "PIPE_SIZE",
    "IOV_MAX",
    "PEER_GONE",
)
