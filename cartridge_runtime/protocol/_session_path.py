"""The cartridge session's per-frame path for a request's body frames, compiled.

A small request's STREAM_START, CHUNK, STREAM_END and END each cost the session a dispatch
(``Session._dispatch``), the connection's routing (:meth:`CartridgeConnection.receive`), the
receiver's fast path and a delivery into the request's input (``Session._deliver``): four
Python calls and a few hundred bytecodes a frame. :func:`flow_dispatcher` gives the session
one C call for all of it (``_speedups.deliver_flow``) on the codec's terms: the compiled code
takes the common valid case, a frame of an open, running request that the receiver's fast
path takes whole and whose one event is a value, a stream's end or the body's end, and hands
everything else, before it changes anything, to the Python dispatch (``fallback``); an event
it does not deliver itself goes to the Python delivery (``deliver``).
``CARTRIDGE_RUNTIME_PURE_PYTHON=1`` switches it off (``fallback`` is then the dispatch).

The mailbox entries it queues are the runtime's own (given by the session, which owns them),
into the ``_box`` of each stream feed, as ``StreamFeed.push_data`` and ``push_end`` do.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from . import _request_state
from ._cartridge_conn import CartridgeConnection
from ._conn_state import ConnState
from ._constants import COALESCE_BYTES, PROTOCOL_VERSION, PURE_PYTHON_ENV, FrameType
from ._events import BodyEnded, Event, StreamClosed, StreamData
from ._frame import Frame, MessageId
from ._outgoing import OutgoingStream, OutState

#: ``(configure_delivery, deliver_flow, queue_frames)`` of the compiled module, or ``None``
#: without it (or with ``CARTRIDGE_RUNTIME_PURE_PYTHON`` set).
_compiled: tuple[Any, Any, Any] | None
try:
    from ._speedups import configure_delivery, deliver_flow
    from ._speedups import queue_frames as _c_queue_frames

    _compiled = (
        None
        if os.environ.get(PURE_PYTHON_ENV)
        else (
            configure_delivery,
            deliver_flow,
            _c_queue_frames,
        )
    )
except ImportError:  # pragma: no cover - the extension is optional
    _compiled = None

__all__ = (
    "compiled_hold",
    "flow_dispatcher",
    "frame_queuer",
    "small_output_paths",
)

_FLOW = (FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END, FrameType.END)


def flow_dispatcher(
    conn: CartridgeConnection[Any],
    active: Mapping[MessageId, Any],
    fallback: Callable[[Frame], None],
    deliver: Callable[[Any, Frame, list[Event]], None],
    *,
    data_tag: object,
    end_entry: tuple[object, ...],
    pass_through_min: int,
) -> Callable[[Frame], None]:
    """The session's dispatch of one frame: ``fallback`` itself when not compiled, else the
    compiled body-frame path in front of it (see the module docstring).

    :param conn: the session's connection, in the state it serves requests from now on.
    :param active: the IO side of each open request by id (each has ``inputs``, a dict of
        stream feeds by stream id, and ``feed``, the package's feed).
    :param fallback: the Python dispatch of a frame.
    :param deliver: the Python delivery of a frame's events to a request's IO side.
    :param data_tag: the mailbox entry tag of a value.
    :param end_entry: the mailbox entry of a stream's end.
    :param pass_through_min: the smallest byte value the Python delivery may keep with its
        wire form (left to it).
    """
    if _compiled is None or _request_state._c_receive is None:
        return fallback
    configure, deliver_flow, _ = _compiled
    configure(_FLOW, StreamData, StreamClosed, BodyEnded, data_tag, end_entry, pass_through_min)
    ready = conn._tables[ConnState.READY]
    return functools.partial(
        deliver_flow, conn, conn.requests, conn.outbox, ready, active, fallback, deliver
    )


#: ``queue(outbox, stream, frames, chunk_type) -> int``: see :func:`frame_queuer`.
FrameQueuer = Callable[[Any, Any, list[Frame], FrameType], int]


def queue_frames(outbox: Any, stream: Any, frames: list[Frame], chunk_type: FrameType) -> int:
    """Queue frames from the front of ``frames`` into ``outbox`` (a ``FrameOutbox`` that
    encodes at flush time) while ``outbox.try_send`` takes them, spending one of
    ``stream.credit`` per frame of ``chunk_type`` (``stream`` ``None``: no credit to spend);
    how many were queued. The rest, from the first CHUNK without credit or the first frame
    the outbox would make wait, is the caller's to send the waiting way."""
    try_send = outbox.try_send
    for i, f in enumerate(frames):
        if f.frame_type is chunk_type and stream is not None:
            if stream.credit <= 0 or not try_send(f):
                return i
            stream.credit -= 1
        elif not try_send(f):
            return i
    return len(frames)


def frame_queuer() -> FrameQueuer:
    """:func:`queue_frames`, compiled where the extension is (``_speedups.queue_frames``:
    the same steps in one call, the queue's counters read once and written once, the queue
    scheduled for writing once at the end; a closed outbox queues nothing there, so that the
    caller's waiting path drops and counts the frames as ``try_send`` would)."""
    return queue_frames if _compiled is None else _compiled[2]


def _no_open(stream: OutgoingStream, data: bytes | memoryview, now: float) -> list[Frame] | None:
    return None


def _no_close(stream: OutgoingStream) -> list[Frame] | None:
    return None


#: ``open_small(stream, data, now)`` and ``close_small(stream)`` (see :func:`small_output_paths`).
OpenSmall = Callable[[OutgoingStream, bytes | memoryview, float], list[Frame] | None]
CloseSmall = Callable[[OutgoingStream], list[Frame] | None]


def small_output_paths() -> tuple[OpenSmall, CloseSmall]:
    """``(open_small, close_small)``: a small response output's frames in one C call each.

    ``open_small(stream, data, now)`` is ``stream.start(is_sequence=False, unbounded=False)``
    then ``stream.write_bytes(data, now)`` for a new coalescing stream and a byte string
    shorter than ``COALESCE_BYTES``: ``[STREAM_START]``, the bytes buffered.
    ``close_small(stream)`` is ``stream.close()`` for an open stream whose buffered bytes fit
    one CHUNK: ``[CHUNK, STREAM_END]``. Either answers ``None``, having changed nothing, for
    any other case, and always when not compiled: the caller then calls those methods.
    """
    if _outputs is None:
        return _no_open, _no_close
    return _outputs


def _load_outputs() -> tuple[OpenSmall, CloseSmall] | None:
    if _compiled is None:
        return None
    from ._speedups import close_small, configure_outputs, open_small

    configure_outputs(
        Frame,
        (FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END, FrameType.END),
        (OutState.NEW, OutState.OPEN, OutState.CLOSED),
        PROTOCOL_VERSION,
        COALESCE_BYTES,
    )
    return open_small, close_small


_outputs = _load_outputs()


def compiled_hold() -> Callable[[Any, Coroutine[Any, Any, Any]], Awaitable[Any]] | None:
    """``held_while_running(outbox, coro)``: ``coro`` awaited with ``outbox.hold()`` each time
    it resumes and ``outbox.release()`` each time it suspends or ends, results, errors and
    cancellation passed through (a compiled awaitable, no generator frame); ``None`` when not
    compiled, and the runtime's own Python class does it."""
    if _compiled is None:
        return None
    from ._speedups import held_while_running

    return held_while_running
