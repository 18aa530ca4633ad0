"""The host's call path compiled: a small call's request frames made, or written straight to
their wire bytes, in one C call (``_csrc/_request.c``), and its response frames each routed
to the call, run through the call's receiver and queued as the output event they make in one
C call (``_csrc/_response.c``), or a block's worth of them read from the bytes and routed in
one (``_csrc/_response_wire.c``), with no frame made.

Request
-------
:func:`request_frames` makes every frame of a request whose inputs are all small byte
strings (REQ; STREAM_START, one CHUNK, STREAM_END per input; END), the same frames the frame
builders make; for anything else it answers ``None`` and the engine builds the request.
:func:`request_wire` writes the same frames straight to their wire form, for a connection
that queues encoded bytes (no frame tap watching).

Response
--------

A small call's response is four frames (STREAM_START, one CHUNK, STREAM_END, END); in Python
each goes through the shell's dispatch, :meth:`~._host_conn.HostConnection.receive_frame`,
the flow's ``on_frame``, the receiver and an event handler, about a thousand bytecodes a
call. The compiled router takes the common valid case of those four frames whole and hands
everything else, before it has changed anything, to the Python router it was given, which
stays the one that decides.

The router holds no state of its own: it reads and writes the call's parts where they are,
in slots, so the flow class the engine registers must keep, as ``__slots__``, the fields the
C code reads and writes:

* ``done``, ``abandoned`` (both ``False`` to be taken), ``observation`` (``None``),
  ``xid`` (the very object the frame's routing id is: the host shares its ids),
* ``receiver``, a :class:`~._request_state.BodyReceiver` with no CREDIT waiting,
* ``frames`` (an int, counted up), ``_queued`` (set to ``None``),
* ``events``, a deque of ``(event, credit stream or None)``; ``_outputs``, a dict from a
  stream id to ``(output, media URN, is_sequence)``;
* ``_waiter`` (``None``, or a wake-up whose ``set()`` is called once events were queued),
* ``end_meta`` and ``_finish(None)``, which END sets and calls.

The router applies the receiver's own transitions to the call's receiver (its streams made
with every slot set, as ``_Stream.__init__`` and the STREAM_START transition leave them) and
makes the output event straight from the frame, with no receiver event in between. The
three output event classes and the stream class are slotted with exactly the fields the C
code sets, which it checks at registration (an added field switches the path off instead
of leaving it unset). ``CARTRIDGE_RUNTIME_PURE_PYTHON=1`` switches it off too.

Block
-----
:func:`block_router` gives the same routing one step earlier: the frames at the front of a
block are read from its bytes as the codec's reader reads them (only the keys of those four
kinds, in wire order, of the types the reader stores; ids the decoder's cache holds) and
routed as above, up to the first frame it does not take whole, from which the decoder and the
routers carry on. No frame object is made for the frames it takes.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._constants import (
    PROTOCOL_VERSION,
    PURE_PYTHON_ENV,
    REQ_CONTENT_TYPE,
    CreditDirection,
    FrameType,
)
from ._frame import Frame, MessageId
from ._request_state import BodyReceiver, RequestState, StreamState, _Stream

__all__ = (
    "block_router",
    "compile_response_path",
    "ready",
    "receiver_factory",
    "request_frames",
    "request_wire",
    "response_router",
)

T = TypeVar("T")

#: ``_speedups.route_response`` once a flow class is registered, else ``None``.
_route: Any = None
#: ``_speedups.route_block`` likewise.
_route_block: Any = None
#: ``_speedups.new_receiver`` likewise.
_new_receiver: Any = None


async def _ready_coroutine(value: T) -> T:
    return value


def ready(value: T) -> Awaitable[T]:
    """An awaitable that gives ``value`` at once (what an async iterator returns for a value
    it already holds). Compiled, this name is ``_speedups.ready``: one small object and no
    coroutine; here, a coroutine."""
    return _ready_coroutine(value)


def request_frames(
    rid: MessageId,
    xid: MessageId | None,
    cap: str,
    inputs: list[tuple[str, Any]],
    max_chunk: int,
    credit: int,
    max_total: int,
) -> list[Frame] | None:
    """Every frame of a request to ``cap`` whose ``inputs`` are all byte strings of 1 to
    ``max_chunk`` bytes (``max_total`` at most together; ``credit`` above 0), each sent as
    stream ``arg-<index>`` in one CHUNK; ``None`` for any other request. Compiled, this name
    is ``_speedups.request_frames``; here, always ``None`` (the engine builds the frames)."""
    return None


def request_wire(
    rid: MessageId,
    xid: MessageId | None,
    cap: str,
    inputs: list[tuple[str, Any]],
    max_chunk: int,
    credit: int,
    max_total: int,
    max_frame: int,
) -> bytes | None:
    """The frames :func:`request_frames` makes, already in their wire form, each with its
    length prefix and numbered 0, 1, 2... (as a flow queued whole is numbered), with no
    frame object made; ``None`` for any other request, or a frame body over ``max_frame``.
    Compiled, this name is ``_speedups.request_wire``; here, always ``None``."""
    return None


def compile_response_path(flow_class: type, outputs: tuple[type, type, type]) -> bool:
    """Register ``flow_class`` (see the module docstring) and its output events (started,
    data, ended) with the compiled router; ``False`` when it is not built, switched off, or
    refused the classes (then :func:`response_router` gives ``None``)."""
    global _route, _route_block, _new_receiver
    _route = _route_block = _new_receiver = None
    if os.environ.get(PURE_PYTHON_ENV):
        return False
    try:
        from ._speedups import configure_response, new_receiver, route_block, route_response
    except ImportError:
        return False
    try:
        configure_response(
            frame_types=(
                FrameType.STREAM_START,
                FrameType.CHUNK,
                FrameType.STREAM_END,
                FrameType.END,
            ),
            frame_class=Frame,
            flow_class=flow_class,
            receiver_class=BodyReceiver,
            stream_class=_Stream,
            request_states=(RequestState.OPEN, RequestState.DONE),
            stream_states=(StreamState.OPEN, StreamState.CLOSED),
            deque_class=deque,
            outputs=outputs,
            credit_dir=CreditDirection.RESPONSE,
        )
    except (TypeError, ValueError):
        return False
    _route = route_response
    _route_block = route_block
    _new_receiver = new_receiver
    return True


def _python_receiver(rid: MessageId, xid: MessageId | None, initial_credit: int) -> BodyReceiver:
    return BodyReceiver(rid, xid=xid, initial_credit=initial_credit, expect_req=False)


def receiver_factory() -> Callable[[MessageId, MessageId | None, int], BodyReceiver]:
    """What makes the receiver of a call's response, ``(rid, xid, initial_credit)``:
    ``BodyReceiver(rid, xid=xid, initial_credit=initial_credit, expect_req=False)``, made in
    one C call once a flow class is registered (its instance dict filled as ``__init__``
    fills it, without running it)."""
    make: Callable[[MessageId, MessageId | None, int], BodyReceiver] = (
        _new_receiver if _new_receiver is not None else _python_receiver
    )
    return make


def response_router(
    core: object, fallback: Callable[[Frame], None]
) -> Callable[[Frame], None] | None:
    """The compiled router of connection ``core`` (a
    :class:`~._host_conn.HostConnection`), handing ``fallback`` every frame it does not
    take; ``None`` when no flow class is registered."""
    if _route is None:
        return None
    return functools.partial(_route, core, fallback)


def block_router() -> Callable[[object, memoryview, int], int] | None:
    """``route_block(core, block, max_frame)``: the whole frames at the front of a block the
    cartridge wrote (nothing pending before it), read and routed in one C call as
    :func:`response_router` routes the frames the decoder makes of them, but with no frame
    made, up to the first frame it does not take whole; it returns that frame's offset, and
    the caller feeds the rest to the decoder. ``None`` when no flow class is registered."""
    route: Callable[[object, memoryview, int], int] | None = _route_block
    return route


def _load_request() -> None:
    """Put the compiled :func:`ready` and :func:`request_frames` in place of the plain ones
    (called once; the module's names are read on first use, after it)."""
    if os.environ.get(PURE_PYTHON_ENV):
        return
    try:
        from ._speedups import configure_request
        from ._speedups import ready as compiled_ready
        from ._speedups import request_frames as compiled_request
        from ._speedups import request_wire as compiled_wire
    except ImportError:
        return
    from ._speedups import install_id_hash

    # Ids hash as hash(id.value) already (``_frame``): the same, from the type's own slot.
    install_id_hash(MessageId)
    configure_request(
        frame_class=Frame,
        frame_types=(
            FrameType.REQ,
            FrameType.STREAM_START,
            FrameType.CHUNK,
            FrameType.STREAM_END,
            FrameType.END,
        ),
        version=PROTOCOL_VERSION,
        content_type=REQ_CONTENT_TYPE,
    )
    names = globals()
    names["ready"] = compiled_ready
    names["request_frames"] = compiled_request
    names["request_wire"] = compiled_wire


_load_request()
