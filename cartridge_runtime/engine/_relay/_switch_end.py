"""The switch as seen from a host's engine: one relay link, as the far end of peer links.

A REQ from the switch is served exactly as a cartridge's peer call is: a
:class:`~cartridge_runtime.engine._peer.PeerLink` whose *origin* is this end joins it to the
cartridge that serves the cap (started when needed, through its pools). A peer call a
cartridge of this host makes goes the other way: this end is the link's *target*, and the
switch routes it (to this host or another). The :class:`~cartridge_runtime.relay.HostLink`
core classifies every frame; this class only holds what each open rid is routed to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...protocol import AttributionClass, ErrorCode, Frame, Limits, MessageId, SeqAssigner
from ...relay import HostLink, ToCartridge, switch_forwarder
from .._connection._block_hold import BlockHold, Holdable
from .._connection._counters import Counters
from .._connection._gate import PoolGate
from .._connection._links import Flow, PeerOrigin
from .._connection._shell import Connection
from .._errors import CallError
from .._peer import PeerLink

if TYPE_CHECKING:
    from .._peer import PeerEnd

__all__ = ("SwitchEnd",)

log = logging.getLogger("cartridge_runtime.host")

#: The routing id a peer call toward the switch is given by :meth:`SwitchEnd.next_xid`; it
#: never reaches the wire: the switch assigns the routing id of each REQ it routes.
_SWITCH_ASSIGNS = MessageId(0)

#: The largest frame a relay link carries (the protocol's default limit).
_LINK_MAX_FRAME = Limits().max_frame


class Outbox(Holdable, Protocol):
    """The link's outbox, as this end uses it."""

    def push(self, frame: Frame) -> None: ...


class SwitchEnd:
    """One relay link, host side, as both ends of peer links (see the module docstring).

    :param outbox: the link's outbox (frames toward the switch).
    """

    def __init__(self, name: str, link: HostLink, outbox: Outbox, counters: Counters) -> None:
        self.name = name
        self.core = link
        self._outbox = outbox
        self._push = outbox.push
        #: The link pump's hold: the cartridges frames are forwarded to are held with it.
        self.block = BlockHold()
        #: ``batch(other)``: frames from the switch are about to be forwarded to ``other``,
        #: held until the link's block is dispatched (the hold's own method: no extra call).
        self.batch: Callable[[PeerEnd], None] = self.block.batch
        self.counters = counters
        #: The switch holds admission for what it sends; this end admits every peer call.
        self.gate = PoolGate()
        self.death: CallError | None = None
        self._origins: dict[MessageId, PeerOrigin] = {}
        self._flows: dict[MessageId, Flow] = {}
        #: The forwarding table (RLY-18): the switch's request id -> its joined route toward
        #: the cartridge (:mod:`~cartridge_runtime.relay._forward`).
        self.forwards: dict[MessageId, ToCartridge] = {}

    @property
    def ready(self) -> bool:
        return self.death is None

    # -- toward the switch ------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        """Queue ``frame`` toward the switch; a peer call's own frames go without a routing
        id (the switch gives the REQ one and finds its body by rid)."""
        if self.death is not None:
            self.counters.drops += 1
            return
        if frame.id in self._flows and frame.routing_id is not None:
            frame = frame.replace(routing_id=None)
        self.core.sending(frame)
        self._push(frame)

    def hold(self) -> None:
        """Queue frames toward the switch without writing them until :meth:`release`."""
        self._outbox.hold()

    def release(self) -> None:
        self._outbox.release()

    async def peer_target(self, cap: str) -> tuple[SwitchEnd, str]:
        """Every peer call goes to the switch, which routes it over all its hosts."""
        if self.death is not None:
            raise self.death
        return self, cap

    def next_xid(self) -> MessageId:
        return _SWITCH_ASSIGNS

    def add_flow(self, rid: MessageId, flow: Flow) -> None:
        self._flows[rid] = flow

    def add_origin(self, rid: MessageId, origin: PeerOrigin) -> None:
        self._origins[rid] = origin

    def forget(self, rid: MessageId) -> None:
        origin = self._origins.pop(rid, None)
        self._flows.pop(rid, None)
        if self.forwards.pop(rid, None) is not None and isinstance(origin, PeerLink):
            origin.__dict__.pop("on_frame", None)  # its way back: the link's own again
        self.core.ended(rid)

    def forward(self, rid: MessageId) -> None:
        """Put the request ``rid`` in the forwarding table once its peer link has joined a
        cartridge (RLY-18): its body frames from the switch, and its response frames back,
        then skip the link's Python path. Nothing when the compiled forwarding is not in
        use, the link waits for its cartridge, or the cartridge's frames are tapped."""
        link = self._origins.get(rid)
        if not isinstance(link, PeerLink) or link.done:
            return
        conn = link.target
        if not isinstance(conn, Connection) or conn._tap is not None or link.xid is None:
            return
        route = (
            link,
            link.orig_rid,
            link.orig_xid,
            self,
            self._outbox,
            conn.batch,
            _LINK_MAX_FRAME,
            link.on_frame,
            link.close,
        )
        back = switch_forwarder(route)
        if back is None:
            return
        seq: SeqAssigner = conn.core.seq
        self.forwards[rid] = (
            link.rid,
            link.xid,
            seq._counters,
            seq._closed,
            seq.MAX_CLOSED,
            conn.outbox,
            conn,
            self.batch,
        )
        link.__dict__["on_frame"] = back

    # -- from the switch --------------------------------------------------------------------

    def to_request(self, frame: Frame) -> None:
        """A frame of a request the switch sent (its body, a CREDIT, a CANCEL)."""
        origin = self._origins.get(frame.id)
        if origin is None:
            self.counters.stragglers += 1
            return
        origin.on_requester_frame(frame)

    def to_peer_call(self, frame: Frame) -> None:
        """A frame of the response to a peer call one of this host's cartridges made."""
        flow = self._flows.get(frame.id)
        if flow is None:
            self.counters.stragglers += 1
            return
        flow.on_frame(frame)

    def lost(self, reason: str) -> None:
        """The link closed: the work the switch asked for is cancelled, and the peer calls
        this host's cartridges made fail with ``MASTER_DIED`` (class ``environment``)."""
        if self.death is not None:
            return
        self.death = CallError(
            ErrorCode.MASTER_DIED, AttributionClass.ENVIRONMENT, f"the switch link {reason}"
        )
        origins, self._origins = list(self._origins.values()), {}
        self.forwards.clear()
        flows, self._flows = list(self._flows.values()), {}
        for origin in origins:
            origin.on_origin_death()
        for flow in flows:
            flow.on_death(self.death)
        if origins or flows:
            log.info("%s: link %s; %d requests ended", self.name, reason, len(origins) + len(flows))
