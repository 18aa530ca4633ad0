"""The IO plumbing both ends of a Bifaci connection share: bytes in, frames out, and back.

- :mod:`._outbox`: :class:`FrameOutbox`, the one outbound frame queue and its writer (seq
  numbering, stragglers and drops counted, gathering writes without copies of large payloads,
  synchronous non-blocking flushes, hold/release, withdraw, a writer task woken only when
  needed), with the per-side knobs as constructor parameters.
- :mod:`._pump`: :class:`FramePump`, the one reader pump (reads sized by the decoder, blocks fed
  borrowed, one dispatch callback, a pause while the outbound queue is full, EOF and decoder
  errors reported).
- :mod:`._backend`: every asyncio-specific fast path (the persistent reader callback, the
  ``call_soon`` flush), each with a plain anyio fallback (trio).
- :mod:`._fd`: non-blocking pipes on raw file descriptors (owned by the engine, borrowed by a
  cartridge).

Switching a shell over
----------------------
Each shell's own IO code maps call for call onto this package.

The cartridge's session (``runtime/_session.py``, ``_reader.py``, ``_writer.py``,
``_stdin.py``, ``_handlers.py``, ``_wire.py``, ``_runtime.py``):

=============================================================  =================================
today                                                          here
=============================================================  =================================
``FrameWriter(send, lambda: limits.max_frame)``                ``FrameOutbox(sink_for(send),
                                                               lambda: limits.max_frame,
                                                               encode_at=EncodeAt.FLUSH,
                                                               bound=WRITER_QUEUE)``
``writer.send`` / ``try_send`` / ``push`` / ``flush_now``      the same names on the outbox
``writer.has_room`` / ``wait_room`` / ``close`` / ``done``     the same names on the outbox
``tg.start_soon(writer.run)``                                  ``tg.start_soon(outbox.run)``
``writer.drops`` / ``writer.seq.stragglers``                   ``outbox.counts.drops`` /
                                                               ``outbox.counts.stragglers``
``writer.broken``                                              ``outbox.broken``
the ``InputReader`` mixin                                      ``pump = FramePump(decoder,
                                                               session._dispatch,
                                                               room=outbox)``
``_next_frame()`` (the handshake's read)                       ``await pump.next_frame(receive)``
``_read_loop()``                                               ``await pump.run(source_for(
                                                               receive))``, then ``EXIT_OK``
``_read_size`` / ``_on_block`` / ``_drain`` /                  ``pump.read_size`` / ``on_block``
``_until_drained``                                             / ``drain`` / ``until_drained``
``LoopReceiveStream(fd)`` (``_stdin.py``)                      ``FdReceiveStream(fd)`` (it
                                                               pumps from the loop callback)
``_fdio.FdSendStream(fd)``                                     ``FdSendStream(fd)``
=============================================================  =================================

The engine's connection (``engine/_conn.py``, ``_outbox.py``, ``_call.py``, ``_startup.py``,
``_health.py``, ``_peer.py``, ``_subprocess.py``, ``_placement.py``):

=============================================================  =================================
today                                                          here
=============================================================  =================================
the ``Outbox`` mixin, ``_init_outbox()``                       ``outbox = FrameOutbox(None,
                                                               lambda: limits.max_frame,
                                                               counts=counters)``
``self._stdin = process.stdin`` after launch                   ``outbox.attach(process.stdin)``
``tg.start_soon(self._writer)``                                ``tg.start_soon(outbox.run)``
``conn.send(f)``                                               ``outbox.push(f)``
``conn.send_numbered(f, seq)``                                 ``outbox.push_numbered(f, seq)``
``hold`` / ``release`` / ``flush`` / ``drain`` / ``mark`` /    the same names on the outbox
``withdraw`` / ``forget_flow`` / ``batches``
``state`` set to ``dead`` / ``failed`` (later frames dropped)  also ``outbox.close()``
``_reader`` / ``_read_size`` / ``_on_block``                   ``pump = FramePump(decoder,
                                                               conn._dispatch, hold=outbox,
                                                               read_size=config.read_size,
                                                               on_error=describe_stray)``;
                                                               ``await process.read_blocks(
                                                               size, pump.feed,
                                                               pump.read_size, buffer)``
``_fdio.read_blocks(reader, ...)`` (``_subprocess.py``)        ``await pump.run(reader)``
                                                               (``FdReader.stream_blocks``)
``_placement.ByteSink``                                        :class:`ByteSink`
``_fdio.FdReader`` / ``FdWriter`` / ``make_pipe`` /            the same names here
``grow_pipe``
=============================================================  =================================

Meanwhile the older modules are thin faces over this package, with their public methods
unchanged: ``runtime/_writer.py`` (``FrameWriter`` binds ``push``, ``try_send``, ``send``,
``flush_now``, ``wait_room`` and ``close`` straight to its outbox's), ``engine/_outbox.py``
(``Outbox`` likewise, with ``_stdin``, ``_hold`` and ``_out`` as properties over the outbox's
``attach``, ``hold``/``release`` and ``pending``), ``runtime/_stdin.py`` (``LoopReceiveStream.pump``
over :meth:`FdReceiveStream.stream_blocks`) and ``_fdio.py`` (re-exports, and ``read_blocks``
over :func:`read_fd`). A shell switched over as above no longer imports them; once neither
does, they go.

Behaviour that changed with the switch: an engine frame queued outside a hold is written from
a loop callback on asyncio instead of waking the writer task (the cartridge's way, cheaper);
the engine's connection counts stragglers and drops through the ``counts`` it passes in.
"""

from ._backend import Block, Cancellable, SoonCaller, event_factory, read_fd, soon_caller
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
