"""Requests that reach the engine from elsewhere than its application: a cartridge's peer call
(forwarded to the cartridge that serves the cap, or to the switch this engine serves as a
host), the grow-graph cap (answered by the engine itself, GRW-10), and a relay switch's
requests when this engine serves one as a cartridge host (RLY-*).

Each request becomes a :class:`~._peer.PeerLink`; a request whose cartridge is ready and
admits it is joined at once, without a task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..protocol import Frame
from ._connection._shell import Connection
from ._errors import EngineClosed
from ._graphs._hub import GrowHub
from ._life import EngineLife
from ._peer import OnRouted, PeerEnd, PeerLink, PeerRouter, run_peer_link
from ._replicas import CartridgeSlot
from ._routing import CapRouter
from ._supervision._watchdog import Watchdog

__all__ = ("PeerRequests",)


class PeerRequests:
    """Where the engine's peer and relayed requests go (see the module's docstring)."""

    def __init__(
        self,
        *,
        life: EngineLife,
        slots: Mapping[str, CartridgeSlot],
        router: CapRouter,
        grow_hub: GrowHub,
        watchdog: Watchdog,
        activity_limit: Callable[[float | None, Any, str], float | None],
    ) -> None:
        self._life = life
        self._slots = slots
        self._router = router
        self._grow_hub = grow_hub
        self._watchdog = watchdog
        self._activity_limit = activity_limit
        #: Where peer calls go instead of ``router`` (a relay switch this engine serves).
        self._peer_router: PeerRouter | None = None

    def redirect_peers(self, router: PeerRouter | None) -> None:
        """Send the cartridges' peer calls to ``router`` (None: back to this engine's)."""
        self._peer_router = router

    def on_peer_request(self, origin: PeerEnd, frame: Frame) -> None:
        """A cartridge sent a peer REQ."""
        cap = frame.cap
        # Every spelling of the grow-graph cap holds "grow-graph" (what is_grow_cap looks at
        # first): the graph model is imported only for such a request.
        if (
            isinstance(origin, Connection)
            and cap
            and "grow-graph" in cap
            and self._answer_grow(origin, frame)
        ):
            return
        self._start_link(self._peer_router or self._router, origin, frame)

    def _answer_grow(self, origin: Connection, frame: Frame) -> bool:
        """Answer a grow-graph REQ itself (GRW-10); ``False``: the REQ names another cap."""
        from ._graphs._grow import GrowRequest, is_grow_cap, run_grow_request

        if not is_grow_cap(frame.cap):
            return False
        grow = GrowRequest(self._grow_hub, origin, frame, self._router.resolve)
        if not self._life.running:
            grow.on_origin_death()
            return True
        assert self._life.tg is not None
        self._life.tg.start_soon(run_grow_request, grow)
        return True

    def serve_request(self, origin: PeerEnd, frame: Frame) -> None:
        """A relay switch sent a REQ to this engine serving it as a host."""
        tg = self._life.tg
        if tg is not None and not self._life.closed and frame.cap:
            ready = self._router.ready_target(frame.cap)
            if ready is not None:  # the common case: no task for the request
                link = PeerLink(self._router, origin, frame, self._watch_relayed)
                if link.connect_now(*ready):
                    return
                tg.start_soon(run_peer_link, link)
                return
        self._start_link(self._router, origin, frame, self._watch_relayed)

    def _watch_relayed(self, link: PeerLink, conn: PeerEnd, handler: str) -> None:
        """A request from the switch gets the activity timeout a call of this engine's own
        to that cartridge gets (its cartridge's, else its cap's, else the engine's)."""
        slot = self._slots.get(conn.name)
        definition = conn.definition(handler) if isinstance(conn, Connection) else None
        per_cartridge = slot.activity_timeout if slot is not None else None
        limit = self._activity_limit(per_cartridge, definition, conn.name)
        if limit is not None and limit != math.inf and not link.done:
            self._watchdog.watch(link, limit)

    def _start_link(
        self,
        router: PeerRouter,
        origin: PeerEnd,
        frame: Frame,
        on_routed: OnRouted | None = None,
    ) -> None:
        link = PeerLink(router, origin, frame, on_routed)
        tg = self._life.tg
        if tg is None or self._life.closed:
            link.error_to_origin(EngineClosed())
            return
        tg.start_soon(run_peer_link, link)
