"""A cartridge host's forwarding table: a joined request's body frames relayed between the
switch's socket and the cartridge's pipe with only what must change rewritten (RLY-18).

Rules first:

1. Toward the cartridge, a STREAM_START, CHUNK, STREAM_END or END of a request the switch
   opened leaves with the host's request id and routing id for that cartridge, and the next
   seq of that flow on the cartridge's pipe; every other field, payload included, unchanged.
2. Toward the switch, a STREAM_START, CHUNK, STREAM_END or END of the cartridge's response
   leaves with the switch's request id and routing id and the seq the cartridge gave it (a
   host's frames keep their seq on the link, RLY-8); the END then ends the peer link.
3. These are exactly the bytes the Python path (the peer link's forwarding, then the
   outbox's numbering and encoding) writes for the same frame: the table is a shortcut, not
   a second set of rules. Anything else (a REQ, ERR, CANCEL, CREDIT, LOG, a frame the codec
   leaves to Python, a straggler, an outbox not held for the block, a closed link) takes the
   Python path, before anything has changed.

Theory: the host's switch end keeps ``forwards``, the switch's request id → one
:data:`ToCartridge` entry per joined request; :func:`switch_dispatch` puts the compiled
``relay_to_cartridge`` in front of the link's dispatch. The cartridge's frames of the request
reach the peer link's ``on_frame``; :func:`switch_forwarder` gives that one link a compiled
``relay_to_switch`` in front of its own. Both encode the rewritten frame onto the outbox the
block being dispatched holds, as the outbox's push would. Without the compiled module (or
with ``CARTRIDGE_RUNTIME_PURE_PYTHON`` set) neither is used: the Python path does it all.

The switch's side (:func:`app_router`) is the same idea for the responses to its
application's calls: a host's STREAM_START, CHUNK and STREAM_END go into the call's flow
through the engine's compiled response router, as a local cartridge's do.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from ..protocol import Frame, FrameType, response_router
from ..protocol._constants import PURE_PYTHON_ENV

__all__ = (
    "ToCartridge",
    "ToSwitch",
    "app_router",
    "forwarding_compiled",
    "switch_dispatch",
    "switch_forwarder",
)

#: ``(new id, new routing id, counters, closed, max_closed, outbox, connection, batch)``: a
#: joined request's route toward its cartridge (the numbering's dicts, keyed by raw values,
#: the pipe's outbox, and ``batch(connection)``, which holds that outbox for the block).
ToCartridge = tuple[Any, Any, dict[Any, int], Any, int, Any, Any, Callable[[Any], None]]
#: ``(link, id, routing id, switch end, outbox, batch, max_frame, fallback, close)``: its way
#: back (``close()`` after the END, as the link's own ``on_frame`` does).
ToSwitch = tuple[
    Any, Any, Any, Any, Any, Callable[[Any], None], int, Callable[[Frame], None], Callable[[], None]
]

#: The compiled functions, or ``None`` (not built, or the pure-Python path asked for).
_to_cartridge: Any = None
_to_switch: Any = None
_to_app: Any = None


def _load() -> None:
    global _to_cartridge, _to_switch, _to_app
    if os.environ.get(PURE_PYTHON_ENV):
        return
    try:
        from ..protocol._speedups import (
            configure_forwarding,
            relay_to_app,
            relay_to_cartridge,
            relay_to_switch,
        )
    except ImportError:
        return
    configure_forwarding(
        (FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END, FrameType.END)
    )
    _to_cartridge, _to_switch, _to_app = relay_to_cartridge, relay_to_switch, relay_to_app


def forwarding_compiled() -> bool:
    """Whether the compiled forwarding is in use."""
    return _to_cartridge is not None


def switch_dispatch(
    forwards: dict[Any, ToCartridge], fallback: Callable[[Frame], None]
) -> Callable[[Frame], None]:
    """The dispatch of a host's link: the forwarding table first, ``fallback`` for every
    frame it does not take (``fallback`` itself without the compiled module)."""
    if _to_cartridge is None:
        return fallback
    return functools.partial(_to_cartridge, forwards, fallback)


def switch_forwarder(route: ToSwitch) -> Callable[[Frame], None] | None:
    """The ``on_frame`` of a joined request's peer link: its response frames toward the
    switch, ``route[-1]`` (the link's own) for every frame it does not take; ``None``
    without the compiled module."""
    if _to_switch is None:
        return None
    return functools.partial(_to_switch, route)


def app_router(core: object, fallback: Callable[[Frame], None]) -> Callable[[Frame], None]:
    """A switch's dispatch of one host's frames: a STREAM_START, CHUNK or STREAM_END for a
    call in ``core.calls`` (the calls routed to that host whose cartridge answered before)
    goes into the call's flow as a cartridge's own response frame does (the engine's
    compiled response router, when the call is plain); everything else, and the END (which
    ends the switch's route first), to ``fallback``."""
    if _to_app is None or response_router(core, fallback) is None:
        return fallback
    return functools.partial(_to_app, core, fallback)


_load()
