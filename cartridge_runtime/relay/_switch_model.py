"""The switch core's model: host slot states and their transitions, the actions the core
returns, what it keeps per host, per probe and per routed request, and how a cap picks its
host (sans-IO; :mod:`._switch` is the core that uses them)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..protocol import Frame, FrameType, Limits, MessageId
from ..urn import CapUrn, UrnError, ranking_key
from ._inventory import CartridgeRecord, Inventory

__all__ = (
    "BODY_FRAMES",
    "HOST_TRANSITIONS",
    "PICKS_KEPT",
    "RECENT_ENDED",
    "RESERVED_KEPT",
    "WRONG_WAY",
    "HostChanged",
    "HostInput",
    "HostState",
    "HostView",
    "PoolKey",
    "Probe",
    "Route",
    "Slot",
    "SwitchAction",
    "ToApp",
    "ToHost",
    "app_route",
    "best_host",
    "one_flow",
)

#: Ended requests remembered to tell a straggler from a drop (the reference keeps 64).
RECENT_ENDED = 256
#: Requested caps whose route is remembered at once (the table restarts when full).
PICKS_KEPT = 1024
#: Routing ids reserved for calls and not used yet (the set restarts when full).
RESERVED_KEPT = 4096


class HostState(enum.Enum):
    """Where one host slot stands."""

    DETACHED = "detached"  #: no link (never attached yet, or its link closed)
    PROBING = "probing"  #: attached; identity probe in flight, caps held back
    HEALTHY = "healthy"  #: attached and verified: its caps are routed
    UNHEALTHY = "unhealthy"  #: attached, probe failed: inventory shown, caps not routed


class HostInput(enum.Enum):
    """What moves a host slot."""

    ATTACH_WITH_CAPS = "attach_with_caps"
    ATTACH_WITHOUT_CAPS = "attach_without_caps"
    PROBE_PASSED = "probe_passed"
    PROBE_FAILED = "probe_failed"
    CAPS_APPEARED = "caps_appeared"  #: a RELAY_NOTIFY brought caps to a host that had none
    LINK_LOST = "link_lost"


_S, _I = HostState, HostInput
#: Every move of a host slot; a pair not listed is refused (:class:`HostAttachError` for an
#: attach, otherwise ignored as a late event).
HOST_TRANSITIONS: Mapping[tuple[HostState, HostInput], HostState] = {
    (_S.DETACHED, _I.ATTACH_WITH_CAPS): _S.PROBING,
    (_S.DETACHED, _I.ATTACH_WITHOUT_CAPS): _S.HEALTHY,
    (_S.PROBING, _I.PROBE_PASSED): _S.HEALTHY,
    (_S.PROBING, _I.PROBE_FAILED): _S.UNHEALTHY,
    (_S.HEALTHY, _I.CAPS_APPEARED): _S.PROBING,
    (_S.PROBING, _I.LINK_LOST): _S.DETACHED,
    (_S.HEALTHY, _I.LINK_LOST): _S.DETACHED,
    (_S.UNHEALTHY, _I.LINK_LOST): _S.DETACHED,
}


@attrs.frozen
class ToHost:
    """Write ``frame`` on the link of host ``host``."""

    host: str
    frame: Frame


@attrs.frozen
class ToApp:
    """Hand ``frame`` to the application (a response to one of its requests)."""

    frame: Frame


@attrs.frozen
class HostChanged:
    """Host ``host`` moved to ``state`` (``error``: why it is unhealthy or detached)."""

    host: str
    state: HostState
    error: str | None = None


SwitchAction = ToHost | ToApp | HostChanged


@attrs.frozen(kw_only=True)
class HostView:
    """What the switch knows of one host, for status reports."""

    id: str
    state: HostState
    inventory: Inventory
    limits: Limits
    last_error: str | None
    attaches: int


@attrs.define
class Slot:
    """One host id's slot: kept while its link is closed, so a host that comes back with the
    same id is re-attached in place (RLY-7)."""

    id: str
    state: HostState = HostState.DETACHED
    inventory: Inventory = attrs.field(factory=Inventory)
    limits: Limits = attrs.field(factory=Limits)
    last_error: str | None = None
    attaches: int = 0


@attrs.define
class Probe:
    """An identity probe in flight: the nonce sent and what came back so far."""

    host: str
    nonce: bytes
    deadline: float
    echoed: bytearray = attrs.field(factory=bytearray)


PoolKey = tuple[str, tuple[Any, ...], str]


@attrs.define
class Route:
    """One routed request: its routing id, its rid at each end, where it came from and goes,
    the pools it holds, and the frames held while it waits for admission."""

    xid: MessageId
    rid: MessageId  # as the source knows it
    dest_rid: MessageId  # as the destination knows it (a fresh one for a peer call)
    cap: str
    source: str | None  # None: the application
    dest: str
    pools: tuple[PoolKey, ...] = ()
    record: tuple[Any, ...] = ()
    capacities: dict[PoolKey, int] = attrs.field(factory=dict)
    held: list[Frame] | None = None  # frames waiting for admission (the REQ first)
    #: The seq of the application's next flow frame toward the host, for the frames it sends
    #: unnumbered (a streamed body after its REQ, which is 0).
    next_seq: int = 1


#: Frames that follow the route of their request.
BODY_FRAMES = frozenset(
    {
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.END,
        FrameType.ERR,
        FrameType.LOG,
        FrameType.CREDIT,
        FrameType.CANCEL,
        FrameType.CLOSE_STREAM,
    }
)
#: Frames that never travel toward the switch (RLY-9).
WRONG_WAY = frozenset({FrameType.RELAY_STATE, FrameType.POLICY, FrameType.HELLO})


def best_host(slots: Iterable[Slot], cap: str) -> tuple[Slot, str, CartridgeRecord] | None:
    """The host slot, registered cap and record a call to ``cap`` goes to: among healthy
    hosts' dispatchable caps, the smallest (tier, distance); ties go to the first in
    ``slots`` (the first attached). ``None``: no healthy host offers it, or ``cap`` is not a
    cap URN."""
    try:
        request = CapUrn.parse(cap)
    except UrnError:
        return None
    best: tuple[tuple[int, int], Slot, str, CartridgeRecord] | None = None
    for slot in slots:
        if slot.state is not HostState.HEALTHY:
            continue
        for record in slot.inventory.records:
            if not record.routable:
                continue
            for text in record.caps:
                candidate = CapUrn.parse(text)
                if not candidate.is_dispatchable(request):
                    continue
                rank = ranking_key(candidate, request)
                if best is None or rank < best[0]:
                    best = (rank, slot, text, record)
    return None if best is None else best[1:]


def one_flow(flow: Sequence[Frame], reserved: set[int | bytes]) -> bool:
    """Whether ``flow`` is a REQ whose routing id is one of ``reserved`` followed by frames
    of that very rid and routing id (the same objects: the call built them together)."""
    req = flow[0]
    xid = req.routing_id
    if req.frame_type is not FrameType.REQ or xid is None or xid.value not in reserved:
        return False
    for frame in flow:  # noqa: SIM110 (no generator per call)
        if frame.id is not req.id or frame.routing_id is not xid:
            return False
    return True


def app_route(
    routes: Mapping[tuple[MessageId, MessageId], Route],
    answered: set[tuple[str, tuple[Any, ...]]],
    slots: Mapping[str, Slot],
    host: str,
    frame: Frame,
) -> Route | None:
    """The route of the application's request that ``frame``, from ``host``, answers, when
    that host serves it, is attached and its cartridge answered before; else ``None``."""
    xid = frame.routing_id
    if xid is None:
        return None
    route = routes.get((xid, frame.id))
    if (
        route is None
        or route.source is not None
        or route.dest != host
        or (route.dest_rid is not frame.id and route.dest_rid != frame.id)
        or (host, route.record) not in answered
    ):
        return None
    slot = slots.get(host)
    if slot is None or slot.state is HostState.DETACHED:
        return None
    return route
