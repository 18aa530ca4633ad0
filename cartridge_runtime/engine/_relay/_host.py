"""A cartridge host's relay link: an engine's cartridges served to a switch over one stream.

The link announces the inventory (RELAY_NOTIFY) first and again whenever it changes (a
cartridge started, died, was replaced, idled; checked on every lifecycle event and every
``ANNOUNCE_EVERY`` seconds while one runs). Each frame from the switch goes through the
:class:`~cartridge_runtime.relay.HostLink` core; a REQ becomes a peer link into the engine,
so routing, start-up, pools, the memory guard, idle stop and drain are the engine's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from ..._plumbing import FrameOutbox, FramePump
from ...protocol import Frame, FrameDecoder, Limits, ProtocolError
from ...relay import (
    ForPeerCall,
    ForRequest,
    HostLink,
    OpenRequest,
    PolicyChanged,
    Refuse,
    encode_inventory,
    switch_dispatch,
)
from .._connection._counters import Counters
from ._records import inventory_records
from ._switch_end import SwitchEnd
from ._wire import LinkWire

__all__ = ("ANNOUNCE_EVERY", "serve_link")

log = logging.getLogger("cartridge_runtime.host")

#: The largest frame a relay link carries (the protocol's default limit; read once).
_LINK_MAX_FRAME = Limits().max_frame


def _link_max_frame() -> int:
    return _LINK_MAX_FRAME


#: Seconds the frames queued when a link ends get to be written.
FLUSH_GRACE = 1.0
#: Seconds between inventory checks while a cartridge runs (the reference sends every 2 s).
ANNOUNCE_EVERY = 2.0


class _Link:
    """One link's state: the core, the outbox, the switch end (internal)."""

    def __init__(self, engine: Any, stream: anyio.abc.ByteStream, name: str) -> None:
        self.engine = engine
        self.core = HostLink()
        self.wire = LinkWire(stream)
        self.outbox = FrameOutbox(self.wire.sink, _link_max_frame)
        self.end = SwitchEnd(name, self.core, self.outbox, Counters())
        self.stream = stream

    def announce(self, *, force: bool = False) -> None:
        engine = self.engine
        records = inventory_records(engine.status(), engine.manifest)
        frame = self.core.announce(encode_inventory(records), Limits(), force=force)
        if frame is not None and not self.end.death:
            self.outbox.push(frame)

    def dispatch(self, frame: Frame, open_request: Callable[[SwitchEnd, Frame], None]) -> None:
        if self.core.is_request_frame(frame):
            self.end.to_request(frame)
            return
        event = self.core.receive(frame)
        if isinstance(event, ForRequest):
            self.end.to_request(event.frame)
        elif isinstance(event, ForPeerCall):
            self.end.to_peer_call(event.frame)
        elif isinstance(event, OpenRequest):
            open_request(self.end, event.frame)
            self.end.forward(event.frame.id)
        elif isinstance(event, Refuse):
            self.outbox.push(event.reply)
        elif isinstance(event, PolicyChanged):
            self.engine.set_policy(event.policy)
        # StateKept, Absorbed, Unrouted: nothing to do (the core kept or counted them)

    async def announcer(self) -> None:
        async with self.engine.subscribe() as events:
            pending = aiter(events)
            while True:
                with anyio.move_on_after(ANNOUNCE_EVERY):
                    await anext(pending)
                self.announce()


async def serve_link(
    engine: Any,
    stream: anyio.abc.ByteStream,
    name: str,
    open_request: Callable[[SwitchEnd, Frame], None],
    redirect_peers: Callable[[SwitchEnd | None], None],
) -> None:
    """Serve one relay link until it closes (see the module docstring). Its requests end
    with the link; a protocol error from the switch closes it (logged, not raised)."""
    link = _Link(engine, stream, name)
    reason = "closed"
    redirect_peers(link.end)
    try:
        link.announce(force=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(link.outbox.run)
            tg.start_soon(link.announcer)
            # The forwarding table takes a joined request's body frames (RLY-18); every
            # other frame goes through the core.
            dispatch = switch_dispatch(link.end.forwards, lambda f: link.dispatch(f, open_request))
            pump = FramePump(FrameDecoder(), dispatch, hold=link.end.block)
            try:
                await pump.run(link.wire.source)
            except ProtocolError as exc:
                reason = f"broke the protocol: {exc}"
                log.warning("%s: the switch %s", name, reason)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                reason = f"failed: {exc}"
            link.end.lost(reason)
            link.outbox.close()  # what is queued still goes out (a refusal, the inventory)
            with anyio.move_on_after(FLUSH_GRACE):
                await link.outbox.done.wait()
            tg.cancel_scope.cancel()
    finally:
        link.end.lost(reason)
        redirect_peers(None)
        link.wire.stop()
        with anyio.CancelScope(shield=True):
            await stream.aclose()
