"""The relay switch as a sans-IO core: frames in, frames out with their destination.

Rules first:

1. A host attaches with RELAY_NOTIFY; the switch answers with POLICY before anything else,
   then (when the host offers caps) an identity probe. Until the probe's echo comes back the
   host's caps are not routed; a failed probe leaves it attached but unhealthy (RLY-5, RLY-6).
2. Every routed REQ gets a fresh routing id (xid, key 13); its later frames are routed by
   ``(xid, rid)``, or by rid alone for a side that does not carry the xid (RLY-8).
3. A frame that finds no route is counted: a straggler when its request ended a moment ago,
   a drop otherwise; never a protocol error (RLY-11).

Theory: one slot per host id (kept when its link closes, so a host that comes back with the
same id is re-attached in place, RLY-7), a request table keyed by ``(xid, rid)`` with the
request's source (the application or a host, for a peer call) and destination host, and the
admission counters of each (host, cartridge, pool) (:mod:`._admission`). Every verb returns
the list of :class:`ToHost` / :class:`ToApp` / :class:`HostChanged` actions the shell carries
out in order. Time is an argument; :meth:`SwitchCore.next_deadline` says when to call
:meth:`SwitchCore.handle_timer`. The model (slot states and their transitions, the actions,
slots, probes and routes) is in :mod:`._switch_model`; the identity probe in :mod:`._probe`.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Sequence

from ..protocol import (
    AttributionClass,
    ErrorCode,
    Frame,
    FrameType,
    Limits,
    MessageId,
    NetworkPolicy,
    _frame,
    frames,
)
from ._admission import Admission
from ._errors import HostAttachError, RelayProtocolError
from ._inventory import CartridgeRecord, read_relay_notify, relay_state
from ._probe import PROBE_TIMEOUT, probe_frames, read_probe_frame
from ._switch_model import (
    BODY_FRAMES,
    HOST_TRANSITIONS,
    PICKS_KEPT,
    RECENT_ENDED,
    RESERVED_KEPT,
    WRONG_WAY,
    HostChanged,
    HostInput,
    HostState,
    HostView,
    Probe,
    Route,
    Slot,
    SwitchAction,
    ToApp,
    ToHost,
    app_route,
    best_host,
    one_flow,
)

__all__ = ("SwitchCore",)

#: The frames numbered per (rid, xid) flow (TYP-5).
_FLOW = frozenset(kind for kind in FrameType if kind.is_flow)

#: The response frames before the last that :meth:`SwitchCore.response_for_app` passes.
_APP_RESPONSE = frozenset(
    {
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.LOG,
        FrameType.CREDIT,
    }
)


class SwitchCore(Admission):
    """Routes frames between the application and attached hosts (see the module docstring).

    :param policy: the network policy each host is given first, before anything routed.
    """

    def __init__(self, policy: NetworkPolicy | str = NetworkPolicy.OFFLINE) -> None:
        self.policy = NetworkPolicy(policy)
        self._slots: dict[str, Slot] = {}
        self._routes: dict[tuple[MessageId, MessageId], Route] = {}
        self._xid_of: dict[MessageId, MessageId] = {}  # rid -> xid of its live route
        self._probes: dict[MessageId, Probe] = {}
        Admission.__init__(self)
        self._ended: deque[MessageId] = deque(maxlen=RECENT_ENDED)
        self._ended_set: set[MessageId] = set()
        self._next_xid = 0
        #: Routing ids given out by :meth:`reserve_xid` and not used yet (their values).
        self._reserved: set[int | bytes] = set()
        #: ``_pick``'s answers by requested cap; emptied whenever a host's state or
        #: inventory changes (cap matching costs far more than a dict look-up).
        self._picks: dict[str, tuple[Slot, str, CartridgeRecord] | None] = {}
        #: The RELAY_STATE payload given for each host id, sent again on every attach.
        self._states: dict[str, bytes] = {}
        #: Frames that found no route and belonged to no request that just ended, by type.
        self.drops: dict[str, int] = {}
        #: Frames that arrived for a request that had just ended, by type (harmless).
        self.stragglers: dict[str, int] = {}

    # -- hosts ----------------------------------------------------------------------------

    def hosts(self) -> tuple[HostView, ...]:
        """Every host slot, in the order they were first attached."""
        return tuple(
            HostView(
                id=s.id,
                state=s.state,
                inventory=s.inventory,
                limits=s.limits,
                last_error=s.last_error,
                attaches=s.attaches,
            )
            for s in self._slots.values()
        )

    def limits_of(self, host: str) -> Limits:
        """The limits host ``host`` announced (the defaults for a host never attached)."""
        slot = self._slots.get(host)
        return Limits() if slot is None else slot.limits

    def accepts_attach(self, host: str) -> bool:
        """Whether :meth:`attach` with ``host`` would be accepted now (no live slot has it)."""
        slot = self._slots.get(host)
        return slot is None or slot.state is HostState.DETACHED

    def attach(self, host: str, notify: Frame, now: float) -> list[SwitchAction]:
        """A host connected and sent ``notify``, its first frame: POLICY goes first, then the
        identity probe when it offers caps. A slot already known by ``host`` and detached is
        re-attached in place.

        :raises HostAttachError: ``host`` is attached already (a live slot has the id).
        :raises RelayProtocolError: ``notify`` is not a readable RELAY_NOTIFY.
        """
        slot = self._slots.get(host)
        if slot is not None and slot.state is not HostState.DETACHED:
            raise HostAttachError(
                f"host {host!r} is already attached ({slot.state.value}): one link per id"
            )
        inventory, limits = read_relay_notify(notify)
        if slot is None:
            slot = self._slots[host] = Slot(host)
        slot.inventory, slot.limits = inventory, limits
        self._picks.clear()
        slot.attaches += 1
        slot.last_error = None
        out: list[SwitchAction] = [ToHost(host, frames.policy(self.policy))]
        kept = self._states.get(host)
        if kept is not None:
            out.append(ToHost(host, relay_state(kept)))
        if inventory.caps:
            out += self._move(slot, HostInput.ATTACH_WITH_CAPS)
            out += self._probe(slot, now)
        else:
            out += self._move(slot, HostInput.ATTACH_WITHOUT_CAPS)
        return out

    def host_lost(self, host: str, reason: str = "connection closed") -> list[SwitchAction]:
        """The link of ``host`` closed (or broke a rule): its requests end with ERR
        ``MASTER_DIED`` (class ``environment``) toward their source, the peer calls it had
        made are cancelled, and the slot waits, detached, for the host to come back."""
        slot = self._slots.get(host)
        if slot is None or slot.state is HostState.DETACHED:
            return []
        slot.last_error = reason
        out = self._move(slot, HostInput.LINK_LOST)
        for rid in [rid for rid, p in self._probes.items() if p.host == host]:
            del self._probes[rid]
        message = f"relay host {host} {reason}"
        for route in [r for r in self._live() if host in (r.dest, r.source)]:
            self._end(route)
            if route.dest == host:
                err = frames.err(
                    route.rid, ErrorCode.MASTER_DIED, message, AttributionClass.ENVIRONMENT
                )
                out += self._to_source(route, err)
            elif route.held is None:  # the caller's host is gone: stop the work it asked
                cancel = frames.cancel(
                    route.dest_rid,
                    code=ErrorCode.ABORTED,
                    attribution_class=AttributionClass.ENVIRONMENT,
                    message=f"the calling host {host} went away",
                    xid=route.xid,
                )
                out.append(ToHost(route.dest, cancel))
        return out + self._admit_waiting()

    def set_policy(self, policy: NetworkPolicy | str) -> list[SwitchAction]:
        """Change the policy: a POLICY to every attached host (nothing when it is the same)."""
        word = NetworkPolicy(policy)
        if word == self.policy:
            return []
        self.policy = word
        return [
            ToHost(s.id, frames.policy(word))
            for s in self._slots.values()
            if s.state is not HostState.DETACHED
        ]

    def relay_state(self, host: str, payload: bytes) -> list[SwitchAction]:
        """Give ``host`` the opaque resources payload it keeps (RELAY_STATE, RLY-4): sent now
        when it is attached, and kept to be sent again, right after POLICY, each time it
        attaches (RLY-17)."""
        self._states[host] = payload
        slot = self._slots.get(host)
        if slot is None or slot.state is HostState.DETACHED:
            return []
        return [ToHost(host, relay_state(payload))]

    def route(self, cap: str) -> tuple[str, str, str] | None:
        """Where a REQ for ``cap`` would go now: ``(host, registered cap, cartridge id)``, or
        ``None`` when no healthy host offers it."""
        picked = self._pick(cap)
        if picked is None:
            return None
        slot, registered, record = picked
        return slot.id, registered, record.id

    # -- frames from the application ---------------------------------------------------------

    def send(self, frame: Frame, now: float = 0.0, *, seq: int | None = None) -> list[SwitchAction]:
        """A frame from the application: a REQ is routed by its cap over the healthy hosts;
        any other frame follows the route of its request (counted when it has none).
        ``seq``: the frame's number on the link, set in the same copy as its routing id;
        without it a flow frame takes the next number of its flow (TYP-5)."""
        if frame.frame_type is FrameType.REQ:
            return self._open(frame, None, seq)
        if frame.frame_type in BODY_FRAMES:
            # by rid alone: the routing id the application put on its frames is its own
            xid = self._xid_of.get(frame.id)
            route = None if xid is None else self._routes.get((xid, frame.id))
            if route is None or route.source is not None:
                self._count_unrouted(frame)
                return []
            if seq is None:
                if frame.frame_type in _FLOW:
                    # a body streamed after its REQ: numbered here, per (rid, xid) (TYP-5)
                    seq = route.next_seq
                    route.next_seq = seq + 1
                    toward = frame.replace(routing_id=route.xid, seq=seq)
                else:
                    toward = frame.replace(routing_id=route.xid)
            else:
                route.next_seq = seq + 1
                toward = frame.replace(routing_id=route.xid, seq=seq)
            if route.held is not None:
                if frame.frame_type is FrameType.CANCEL:
                    return self._cancel_held(route, frame)
                route.held.append(toward)
                return []
            return [ToHost(route.dest, toward)]
        raise RelayProtocolError(
            f"{frame.frame_type.name} is not a frame the application routes through the switch"
        )

    def reserve_xid(self) -> MessageId:
        """A fresh routing id for a request of the application's to carry from the start:
        a flow whose REQ carries it can leave through :meth:`send_flow` unchanged."""
        if len(self._reserved) >= RESERVED_KEPT:
            self._reserved.clear()  # calls that never sent: their flows go frame by frame
        xid = self._new_xid()
        self._reserved.add(xid.value)
        return xid

    def send_flow(self, flow: Sequence[Frame]) -> tuple[str | None, list[SwitchAction]]:
        """A whole flow of the application's (REQ, then body), numbered 0, 1, 2... on the
        link. ``(host, [])`` when it is :func:`one_flow` of a :meth:`reserve_xid` id and is
        admitted at once: it goes to ``host`` as it is; else ``(None, send's actions)``."""
        req = flow[0]
        xid = req.routing_id
        if xid is not None and not self._waiting and one_flow(flow, self._reserved):
            self._reserved.discard(xid.value)
            actions = self._open(req, None, 0, xid)
            if len(actions) == 1 and isinstance(actions[0], ToHost):
                route = self._routes[(xid, req.id)]
                if route.held is None:
                    route.next_seq = len(flow)
                    return actions[0].host, []
            out = actions
        else:
            out = self.send(req, seq=0)
        for seq in range(1, len(flow)):
            out += self.send(flow[seq], seq=seq)
        return None, out

    def answered(self, host: str, rid: MessageId) -> bool:
        """Whether the application's request ``rid``, routed to ``host``, is served by a
        cartridge that answered before: its response frames before the last then need
        nothing of this core (what :meth:`response_for_app` passes)."""
        xid = self._xid_of.get(rid)
        route = None if xid is None else self._routes.get((xid, rid))
        return (
            route is not None
            and route.source is None
            and route.dest == host
            and (host, route.record) in self._answered
        )

    # -- frames from a host -------------------------------------------------------------------

    def receive(self, host: str, frame: Frame, now: float = 0.0) -> list[SwitchAction]:
        """A frame from host ``host``.

        :raises RelayProtocolError: a frame that never travels toward the switch (POLICY,
            RELAY_STATE, HELLO) or an unreadable RELAY_NOTIFY; the shell then closes the link
            and calls :meth:`host_lost`.
        """
        slot = self._slots.get(host)
        if slot is None or slot.state is HostState.DETACHED:
            raise RelayProtocolError(f"a frame from host {host!r}, which is not attached")
        kind = frame.frame_type
        if kind is FrameType.RELAY_NOTIFY:
            return self._on_notify(slot, frame, now)
        if kind in WRONG_WAY:
            raise RelayProtocolError(
                f"{kind.name} from host {host!r}: it never travels toward the switch"
            )
        if kind is FrameType.HEARTBEAT:
            return []  # a host's keep-alive is absorbed, never routed
        probe = self._probes.get(frame.id)
        if probe is not None and probe.host == host:
            return self._on_probe_frame(slot, probe, frame)
        if kind is FrameType.REQ:
            # a peer call proves its caller runs: one of the cartridges serving this host's
            # requests; none of them is held to one call at a time any more
            out: list[SwitchAction] = []
            for live in [r for r in self._live() if r.dest == host]:
                if (host, live.record) not in self._answered:
                    out += self._first_answer(live)
            return out + self._open(frame, host)
        route = self._route_of(frame)
        if route is None:
            self._count_unrouted(frame)
            return []
        # A peer call's two ends know it by two rids, so a host calling itself is never
        # confused about which way a frame goes.
        from_source = host == route.source and frame.id == route.rid
        if (
            not from_source
            and host == route.dest
            and frame.id == route.dest_rid
            and kind not in (FrameType.CANCEL, FrameType.CLOSE_STREAM)
        ):
            if frame.frame_type.is_terminal:
                self._end(route)
                out = self._to_source(route, frame)
                if kind is FrameType.END and (host, route.record) not in self._answered:
                    return out + self._first_answer(route)
                return out + self._admit_waiting()
            if (host, route.record) not in self._answered:
                return self._first_answer(route) + self._to_source(route, frame)
            return self._to_source(route, frame)
        if from_source:
            toward = frame.replace(id=route.dest_rid, routing_id=route.xid)
            if route.held is not None:
                if kind is FrameType.CANCEL:
                    return self._cancel_held(route, frame)
                route.held.append(toward)
                return []
            return [ToHost(route.dest, toward)]
        self._count_unrouted(frame)
        return []

    def response_for_app(self, host: str, frame: Frame) -> Frame | None:
        """The common case of :meth:`receive`, without an action list: a response frame
        before the last (STREAM_*, CHUNK, LOG, CREDIT) of the application's request, from
        its host (:func:`app_route`), returned as it came; ``None``: for :meth:`receive`."""
        if frame.frame_type not in _APP_RESPONSE:
            return None
        if app_route(self._routes, self._answered, self._slots, host, frame) is None:
            return None
        return frame

    def end_for_app(self, host: str, frame: Frame) -> list[SwitchAction] | None:
        """The END of such a response (see :meth:`response_for_app`): the route ends, and
        what it lets in is returned; the caller hands ``frame`` to the call's flow itself.
        ``None``: any other case, for :meth:`receive`."""
        if frame.frame_type is not FrameType.END:
            return None
        route = app_route(self._routes, self._answered, self._slots, host, frame)
        if route is None:
            return None
        self._end(route)
        return self._admit_waiting()

    # -- time -----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` has work (a probe that may time out), or ``None``."""
        return min((p.deadline for p in self._probes.values()), default=None)

    def handle_timer(self, now: float) -> list[SwitchAction]:
        """Fail every identity probe whose deadline passed."""
        out: list[SwitchAction] = []
        for rid, probe in list(self._probes.items()):
            if probe.deadline <= now:
                del self._probes[rid]
                slot = self._slots[probe.host]
                out += self._probe_failed(
                    slot, f"identity probe timed out after {PROBE_TIMEOUT:g} s"
                )
        return out

    # -- counters ----------------------------------------------------------------------------

    @property
    def live_requests(self) -> int:
        """Requests routed and not ended (held ones included)."""
        return len(self._live())

    # -- inside: hosts ----------------------------------------------------------------------

    def _move(self, slot: Slot, what: HostInput) -> list[SwitchAction]:
        nxt = HOST_TRANSITIONS.get((slot.state, what))
        if nxt is None:
            return []
        slot.state = nxt
        self._picks.clear()
        error = slot.last_error if nxt in (HostState.UNHEALTHY, HostState.DETACHED) else None
        return [HostChanged(slot.id, nxt, error)]

    def _on_notify(self, slot: Slot, frame: Frame, now: float) -> list[SwitchAction]:
        had_caps = bool(slot.inventory.caps)
        slot.inventory, slot.limits = read_relay_notify(frame)
        self._picks.clear()
        if not had_caps and slot.inventory.caps and slot.state is HostState.HEALTHY:
            return self._move(slot, HostInput.CAPS_APPEARED) + self._probe(slot, now)
        return self._admit_waiting()

    def _probe(self, slot: Slot, now: float) -> list[SwitchAction]:
        rid = MessageId.new()
        nonce = os.urandom(32)
        self._probes[rid] = Probe(slot.id, nonce, now + PROBE_TIMEOUT)
        return [ToHost(slot.id, f) for f in probe_frames(rid, self._new_xid(), nonce)]

    def _on_probe_frame(self, slot: Slot, probe: Probe, frame: Frame) -> list[SwitchAction]:
        ended = read_probe_frame(probe, frame)
        if ended is None:
            return []
        del self._probes[frame.id]
        if ended.failure is not None:
            return self._probe_failed(slot, ended.failure)
        slot.last_error = None
        return self._move(slot, HostInput.PROBE_PASSED) + self._admit_waiting()

    def _probe_failed(self, slot: Slot, reason: str) -> list[SwitchAction]:
        slot.last_error = reason
        return self._move(slot, HostInput.PROBE_FAILED)

    # -- inside: requests ------------------------------------------------------------------

    def _new_xid(self) -> MessageId:
        self._next_xid += 1
        # the id cache's instance: the decoder gives a host's frames this very object back
        xid: MessageId = _frame.int_id(self._next_xid)
        return xid

    def _pick(self, cap: str) -> tuple[Slot, str, CartridgeRecord] | None:
        """The host, registered cap and record a call to ``cap`` goes to: among healthy hosts'
        dispatchable caps, the smallest (tier, distance); ties go to the first attached."""
        if cap in self._picks:
            return self._picks[cap]
        picked = best_host(self._slots.values(), cap)
        if len(self._picks) >= PICKS_KEPT:
            self._picks.clear()
        self._picks[cap] = picked
        return picked

    def _open(
        self,
        req: Frame,
        source: str | None,
        seq: int | None = None,
        xid: MessageId | None = None,
    ) -> list[SwitchAction]:
        cap = req.cap or ""
        picked = self._pick(cap)
        if picked is None:
            err = frames.err(
                req.id,
                ErrorCode.NO_HANDLER,
                f"no host handles cap: {cap}",
                AttributionClass.ENVIRONMENT,
                xid=req.routing_id if source is not None else None,
            )
            return [ToApp(err)] if source is None else [ToHost(source, err)]
        slot, registered, record = picked
        key = record.key
        try:
            chain = self._chain_of(record, registered, (slot.id, key) in self._answered)
        except RelayProtocolError as exc:
            err = frames.err(
                req.id,
                ErrorCode.PROTOCOL_ERROR,
                f"host {slot.id}: {exc.message}",
                AttributionClass.INTERNAL,
                xid=req.routing_id if source is not None else None,
            )
            return [ToApp(err)] if source is None else [ToHost(source, err)]
        reserved = xid is not None
        if xid is None:
            xid = self._new_xid()
        pools, capacities = self._pools_of(slot.id, key, chain)
        route = Route(
            xid=xid,
            rid=req.id,
            # a peer call gets a fresh rid: a cartridge calling itself never meets its own
            dest_rid=req.id if source is None else MessageId.new(),
            cap=cap,
            source=source,
            dest=slot.id,
            pools=pools,
            record=key,
        )
        route.capacities = capacities
        self._routes[(xid, req.id)] = route
        self._xid_of[req.id] = xid
        if source is not None:
            self._routes[(xid, route.dest_rid)] = route
            self._xid_of[route.dest_rid] = xid
        admitted = not self._waiting and self._fits(route)
        if admitted and reserved:
            self._take(route)
            return [ToHost(slot.id, req)]  # it carries the reserved xid: as it is
        if seq is None:
            forwarded = req.replace(id=route.dest_rid, routing_id=xid)
        else:
            forwarded = req.replace(id=route.dest_rid, routing_id=xid, seq=seq)
        if not admitted:
            route.held = [forwarded]
            self._waiting.append(route)
            return self._admit_waiting()
        self._take(route)
        return [ToHost(slot.id, forwarded)]

    def _live(self) -> list[Route]:
        return list({id(r): r for r in self._routes.values()}.values())

    def _cancel_held(self, route: Route, frame: Frame) -> list[SwitchAction]:
        """A request cancelled while waiting for admission ends at once, never sent."""
        self._end(route)
        meta = frame.meta or {}
        err = frames.err(
            route.rid,
            meta.get("code") or ErrorCode.CANCELLED,
            meta.get("message") or "Request cancelled",
            meta.get("attribution_class") or AttributionClass.USER,
        )
        return self._to_source(route, err) + self._admit_waiting()

    def _route_of(self, frame: Frame) -> Route | None:
        xid = frame.routing_id
        if xid is None:
            xid = self._xid_of.get(frame.id)
            if xid is None:
                return None
        return self._routes.get((xid, frame.id))

    def _to_source(self, route: Route, frame: Frame) -> list[SwitchAction]:
        if route.source is None:
            return [ToApp(frame.replace(routing_id=None) if frame.routing_id else frame)]
        src = self._slots.get(route.source)
        if src is None or src.state is HostState.DETACHED:
            self._count_unrouted(frame)
            return []
        return [ToHost(route.source, frame.replace(id=route.rid, routing_id=route.xid))]

    def _end(self, route: Route) -> None:
        for rid in {route.rid, route.dest_rid}:
            self._routes.pop((route.xid, rid), None)
            if self._xid_of.get(rid) == route.xid:
                del self._xid_of[rid]
        if route.held is not None:
            with contextlib.suppress(ValueError):
                self._waiting.remove(route)
            route.held = None
        else:
            self._release(route)
        for rid in {route.rid, route.dest_rid}:
            if len(self._ended) == self._ended.maxlen:
                self._ended_set.discard(self._ended[0])
            self._ended.append(rid)
            self._ended_set.add(rid)

    def _count_unrouted(self, frame: Frame) -> None:
        name = frame.frame_type.name
        table = self.stragglers if frame.id in self._ended_set else self.drops
        table[name] = table.get(name, 0) + 1
