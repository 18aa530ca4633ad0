"""The host side of one cartridge connection, sans-IO: its life, routing and health.

A :class:`HostConnection` holds every protocol decision the engine makes about one cartridge
instance, fed frames and returning what to do; its shell (the engine's connection) only moves
bytes, keeps time and runs tasks.

* **Life** — :class:`~._conn_state.ConnState` (the cartridge side's vocabulary too) with
  :data:`CONN_TRANSITIONS`: ``starting`` until the
  :class:`~._host_startup.HostHandshake` is done, then ``ready``; ``closing`` once a shutdown
  was asked; ``dead`` when the instance ended, ``failed`` when the start-up did.
* **Routing** — every frame the cartridge sends goes to exactly one place, decided by request
  id with one dict lookup on the hot path: a response frame to the flow of a request the host
  sent (an engine call, or a peer call forwarded to this cartridge), a frame of a peer call the
  cartridge made to that call's origin, a new REQ out as :class:`PeerRequest`, a HEARTBEAT
  either answered or matched to a probe of ours. Frames nobody owns are counted: a frame of a
  request that ended is a straggler (a CREDIT then is a harmless late grant), one of a request
  never seen has no route, a frame type the host never accepts from a cartridge (HELLO after
  the handshake, POLICY, RELAY_*) is dropped and counted as a protocol error.
* **Health** — the probes in flight, the misses in a row of the periodic probe and whether
  they reached the limit that kills the cartridge; a reply's pools and statistics.

Events come back only off the hot path (:class:`SendFrames`, :class:`PeerRequest`,
:class:`ProbeAnswered`, :class:`StartupProgress`, :class:`FrameRefused`); a frame delivered to
its owner returns ``None``.
"""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

import attrs

from . import _builders as build
from . import _frame
from ._conn_state import ConnState
from ._constants import CreditDirection, FrameType, NetworkPolicy
from ._errors import HandshakeError, LocalProtocolError
from ._events import ErrorReport
from ._frame import Frame, MessageId
from ._handshake import IdentityCheck
from ._host_startup import HostHandshake, StartupPhase
from ._limits import Limits
from ._seq import SeqAssigner
from ._verbs import NoEvent, WireBytes

__all__ = (
    "CONN_TRANSITIONS",
    "ConnInput",
    "FrameRefused",
    "HealthReport",
    "HostConnection",
    "HostCounters",
    "HostEvent",
    "PeerRequest",
    "ProbeAnswered",
    "RequestFlow",
    "RequesterFlow",
    "SendFrames",
    "StartupProgress",
)

#: Request ids remembered after their flow ended, to tell stragglers from unroutable frames.
CLOSED_RIDS = 4096

#: Frame types routed by request id (to a flow, an origin, or counted as late).
_ROUTED = frozenset(
    [ft for ft in FrameType if ft.is_flow and ft is not FrameType.REQ]
    + [FrameType.CREDIT, FrameType.CANCEL, FrameType.CLOSE_STREAM]
)
#: Frame types only a requester sends: never a response to a request the host sent.
_REQUESTER_ONLY = frozenset((FrameType.CANCEL, FrameType.CLOSE_STREAM))


class ConnInput(enum.Enum):
    """What moves a connection from one state to the next."""

    STARTED = "started"
    START_FAILED = "start_failed"
    CLOSE = "close"
    ENDED = "ended"


_S = ConnState
_C = ConnInput

#: (state, input) -> next state; a pair not listed is a misuse (:class:`LocalProtocolError`).
CONN_TRANSITIONS: dict[tuple[ConnState, ConnInput], ConnState] = {
    (_S.STARTING, _C.STARTED): _S.READY,
    (_S.STARTING, _C.START_FAILED): _S.FAILED,
    (_S.STARTING, _C.ENDED): _S.DEAD,
    (_S.READY, _C.CLOSE): _S.CLOSING,
    (_S.READY, _C.ENDED): _S.DEAD,
    (_S.CLOSING, _C.ENDED): _S.DEAD,
}


class HostCounters(Protocol):
    """The protocol statistics a connection adds to (shared by an engine's connections)."""

    drops: int
    stragglers: int
    late_credits: int
    no_route: int
    protocol_errors: int
    heartbeat_misses: int


class RequestFlow(Protocol):
    """What owns the response frames of one request the host sent to this cartridge."""

    @property
    def xid(self) -> MessageId | None: ...

    def on_frame(self, frame: Frame) -> None: ...


class RequesterFlow(Protocol):
    """What owns the request frames of one peer call this cartridge sent to the host."""

    def on_requester_frame(self, frame: Frame) -> None: ...


F = TypeVar("F", bound=RequestFlow)
O = TypeVar("O", bound=RequesterFlow)  # noqa: E741


@attrs.frozen
class SendFrames:
    """Frames to send the cartridge now (an answer to its HEARTBEAT)."""

    frames: tuple[Frame, ...]


@attrs.frozen
class PeerRequest:
    """The cartridge opened a peer call (its REQ): route it to whoever serves the cap."""

    frame: Frame


@attrs.frozen
class ProbeAnswered:
    """A HEARTBEAT (or an ERR refusing its desired capacities) answered our probe ``hid``."""

    hid: MessageId
    reply: Frame


@attrs.frozen
class StartupProgress:
    """A frame moved the start-up on (to :attr:`phase`, with :attr:`frames` to send now: the
    identity request after HELLO), or failed it (:attr:`error`)."""

    phase: StartupPhase
    error: HandshakeError | None = None
    frames: tuple[Frame, ...] = ()


@attrs.frozen
class FrameRefused:
    """A frame the host does not accept from a cartridge here was dropped (and counted)."""

    frame: Frame
    reason: str


HostEvent = SendFrames | PeerRequest | ProbeAnswered | StartupProgress | FrameRefused


@attrs.frozen
class HealthReport:
    """What a heartbeat reply said.

    :ivar pools: the cartridge's pools (to update admission), if the reply carried them.
    :ivar stats: the rest of the reply's meta.
    :ivar refused: the ERR that refused desired capacities (FLW-14), if it was one.
    """

    pools: Mapping[str, Any] | None
    stats: Mapping[str, Any]
    refused: ErrorReport | None = None


#: Ended probes remembered, to know a late reply when it comes.
_ENDED_PROBES_KEPT = 256


def _is_reply(frame: Frame) -> bool:
    """Whether a HEARTBEAT is a cartridge's reply (it carries the statistics of FLW-13), not a
    probe to answer."""
    meta = frame.meta
    return isinstance(meta, dict) and "pools" in meta


class HostConnection(Generic[F, O]):
    """The host's protocol state for one cartridge connection (see the module docstring).

    :param limits: the host's limits, offered in HELLO.
    :param policy: the POLICY word sent at the end of the start-up (``None``: none).
    :param counters: where routing outcomes are counted.
    :param misses_to_kill: periodic probes missed in a row that kill the cartridge
        (``None``: never).
    """

    def __init__(
        self,
        *,
        limits: Limits,
        policy: NetworkPolicy | str | None,
        counters: HostCounters,
        misses_to_kill: int | None = None,
        identity: IdentityCheck | None = None,
    ) -> None:
        self.handshake = HostHandshake(limits, policy, identity)
        self.state = ConnState.STARTING
        self.counters = counters
        self.misses_to_kill = misses_to_kill
        #: The seq of every frame sent to the cartridge (TYP-3..TYP-6); stragglers counted
        #: in ``counters``.
        self.seq = SeqAssigner(counters)
        self._wire = WireBytes(self.seq, self._max_frame)
        #: Flows of requests the host sent, by request id.
        self.calls: dict[MessageId, F] = {}
        #: Peer calls this cartridge made, by its request id.
        self.origins: dict[MessageId, O] = {}
        # FIFO: an OrderedDict drops its oldest entry in O(1) (a dict's next(iter()) scans
        # past all the deleted slots at its front: ~10 µs per call at this size).
        self._closed_rids: OrderedDict[MessageId, None] = OrderedDict()
        self._next_xid = 1
        #: Routing by request id runs once the identity echo is confirmed.
        self._routing = False
        self._probes: set[MessageId] = set()
        #: Probes that ended (answered or given up), newest last: a reply that comes after is
        #: late, never a probe of the cartridge's to answer (HST-13).
        self._ended_probes: OrderedDict[MessageId, None] = OrderedDict()
        self.healthy = True
        #: Periodic probes missed in a row.
        self.misses = 0
        #: When the last probe was answered (the shell's clock), if ever.
        self.last_heartbeat: float | None = None
        #: The statistics of the last heartbeat reply.
        self.remote_stats: Mapping[str, Any] = {}

    # -- life ------------------------------------------------------------------------------

    def _move(self, inp: ConnInput) -> ConnState:
        before = self.state
        nxt = CONN_TRANSITIONS.get((before, inp))
        if nxt is None:
            raise LocalProtocolError(f"connection: {inp.value} is not allowed when {before.value}")
        self.state = nxt
        return before

    @property
    def limits(self) -> Limits:
        """The negotiated limits (the host's own before the cartridge's HELLO)."""
        return self.handshake.limits

    @property
    def ready(self) -> bool:
        return self.state is ConnState.READY

    @property
    def gone(self) -> bool:
        """Dead or failed: nothing more is sent or routed."""
        return self.state is ConnState.DEAD or self.state is ConnState.FAILED

    def start(self) -> list[Frame]:
        """The frames that open the connection (HELLO)."""
        return self.handshake.start()

    def accept_manifest(self) -> list[Frame]:
        """The shell found the manifest good: the frames to send next (POLICY)."""
        return self.handshake.accept_manifest()

    def started(self) -> None:
        """The last start-up frame reached the pipe: the connection is ready."""
        self.handshake.delivered()
        self._routing = True
        self._move(ConnInput.STARTED)

    def fail_startup(self) -> None:
        """The start-up failed (a bad frame, a timeout, a refused manifest, an early end)."""
        self.handshake.fail()
        self._move(ConnInput.START_FAILED)

    def begin_close(self) -> bool:
        """A shutdown was asked: a ready connection is closing (True); otherwise no change."""
        if self.state is not ConnState.READY:
            return False
        self._move(ConnInput.CLOSE)
        return True

    def ended(self) -> ConnState:
        """The instance ended: the connection is dead. Returns the state it was in (a failed
        or dead one stays as it is)."""
        if self.gone:
            return self.state
        return self._move(ConnInput.ENDED)

    # -- requests --------------------------------------------------------------------------

    def next_xid(self) -> MessageId:
        """A fresh small-uint routing id for a request sent on this connection."""
        xid: MessageId = _frame.int_id(self._next_xid)
        self._next_xid += 1
        return xid

    def add_flow(self, rid: MessageId, flow: F) -> None:
        """Route the response frames of request ``rid`` (sent by the host) to ``flow``."""
        self.calls[rid] = flow

    def add_origin(self, rid: MessageId, origin: O) -> None:
        """Route the request frames of the cartridge's peer call ``rid`` to ``origin``."""
        self.origins[rid] = origin

    def forget(self, rid: MessageId) -> None:
        """A flow of ``rid`` ended: later frames for it are stragglers."""
        self.calls.pop(rid, None)
        if self.origins:  # (the cartridge's peer calls: most connections have none)
            self.origins.pop(rid, None)
        closed = self._closed_rids
        closed[rid] = None
        if len(closed) > CLOSED_RIDS:
            closed.popitem(last=False)

    def take_all(self) -> tuple[list[F], list[O]]:
        """Every flow and origin still routed, unrouted now (the connection ended)."""
        flows, self.calls = list(self.calls.values()), {}
        origins, self.origins = list(self.origins.values()), {}
        return flows, origins

    # -- bytes in, events out, bytes to send (the verbs every core shares) ----------------

    def _max_frame(self) -> int:
        return self.limits.max_frame

    def receive_data(self, data: bytes) -> None:
        """Feed bytes the cartridge wrote; ``b""`` means its output ended.

        :raises ProtocolError: an earlier block was not valid frames.
        """
        self._wire.feed(data)

    def next_event(self) -> HostEvent | NoEvent:
        """The next event the bytes fed so far make (frames it asks to send, a heartbeat's
        answer included, are queued for :meth:`data_to_send`), or ``NEED_DATA`` /
        ``PEER_CLOSED``. Frames routed to a flow or an origin are delivered on the way.

        :raises ProtocolError: the bytes are not valid frames (also an end inside one).
        """
        wire = self._wire
        while (frame := wire.next_frame()) is not None:
            event = self.receive_frame(frame)
            if event is None:
                continue
            if isinstance(event, SendFrames):
                for out in event.frames:
                    wire.queue(out)
                continue
            if isinstance(event, StartupProgress):
                for out in event.frames:
                    wire.queue(out)
            return event
        return wire.end()

    def send(self, frame: Frame) -> None:
        """Queue a frame for the cartridge (what :meth:`start`, :meth:`probe` and
        :meth:`accept_manifest` return, a call's frames), numbered by :attr:`seq`.

        :raises FrameEncodeError: the frame does not fit max_frame.
        """
        self._wire.queue(frame)

    def data_to_send(self) -> bytes:
        """Every byte queued to send since the last call, in order."""
        return self._wire.take()

    # -- frames ----------------------------------------------------------------------------

    def receive_frame(self, frame: Frame) -> HostEvent | None:
        """Route one frame from the cartridge (see the module docstring); ``None`` when it
        went to its owner or was counted."""
        ft = frame.frame_type
        if ft in _ROUTED and self._routing:
            # The hot path: a response frame of one of our requests.
            rid = frame.id
            flow = self.calls.get(rid)
            origin = self.origins.get(rid) if self.origins else None
            if flow is not None and origin is None:
                if ft in _REQUESTER_ONLY:
                    self.counters.drops += 1
                    return None
                flow.on_frame(frame)
                return None
            return self._route_other(frame, ft, flow, origin)
        if not self._routing:
            return self._startup_frame(frame)
        if ft is FrameType.HEARTBEAT:
            if frame.id in self._probes:
                return ProbeAnswered(frame.id, frame)
            if frame.id in self._ended_probes or _is_reply(frame):
                # A late reply to a probe of ours: answering it would start a ping-pong
                # that never ends, as the cartridge answers every HEARTBEAT (HST-13).
                self.counters.no_route += 1
                return None
            return SendFrames((build.heartbeat(frame.id),))
        if ft is FrameType.REQ:
            if frame.id in self.origins:
                self.counters.protocol_errors += 1
                return FrameRefused(frame, f"second REQ for request {frame.id}")
            return PeerRequest(frame)
        # HELLO after the handshake, POLICY, RELAY_* from a cartridge: not allowed; counted.
        self.counters.drops += 1
        self.counters.protocol_errors += ft is not FrameType.HELLO
        return FrameRefused(frame, f"unexpected {ft.name} frame from the cartridge")

    def _startup_frame(self, frame: Frame) -> HostEvent | None:
        handshake = self.handshake
        if not handshake.reading:
            self.counters.drops += 1  # nothing is read before our HELLO is out
            return None
        before = handshake.phase
        try:
            out = handshake.receive(frame)
        except HandshakeError as exc:
            return StartupProgress(handshake.phase, exc)
        if handshake.phase is before:
            return None
        if handshake.phase is StartupPhase.MANIFEST:
            # Frames that race in behind the identity echo (CREDIT, LOG) are routed normally.
            self._routing = True
        return StartupProgress(handshake.phase, frames=tuple(out))

    def _route_other(
        self, frame: Frame, ft: FrameType, flow: F | None, origin: O | None
    ) -> HostEvent | None:
        """A flow/CREDIT/CANCEL frame that is not simply a response to one of our requests."""
        if flow is not None and origin is not None:
            # The same rid both ways (a cartridge calling itself with a reused id):
            # CREDIT says its direction; other frames carry our xid when they answer us.
            if ft is FrameType.CREDIT:
                to_flow = (frame.meta or {}).get("credit_dir") == CreditDirection.REQUEST
            else:
                to_flow = frame.routing_id == flow.xid and ft not in _REQUESTER_ONLY
            if to_flow:
                origin = None
            else:
                flow = None
        if flow is not None:
            if ft in _REQUESTER_ONLY:
                self.counters.drops += 1
                return None
            flow.on_frame(frame)
        elif origin is not None:
            origin.on_requester_frame(frame)
        elif ft is FrameType.ERR and frame.id in self._probes:
            return ProbeAnswered(frame.id, frame)  # a refused desired capacity
        elif frame.id in self._closed_rids:
            # A grant racing the terminal is harmless and expected; anything else is late.
            if ft is FrameType.CREDIT:
                self.counters.late_credits += 1
            else:
                self.counters.stragglers += 1
        else:
            self.counters.no_route += 1
        return None

    # -- health ----------------------------------------------------------------------------

    def probe(
        self, meta: Mapping[str, Any] | None = None, hid: MessageId | None = None
    ) -> tuple[MessageId, Frame]:
        """Open a probe: its id and the HEARTBEAT to send (``meta``: desired capacities;
        ``hid``: the id to use, default a new one)."""
        hid = MessageId.new() if hid is None else hid
        self._probes.add(hid)
        return hid, build.heartbeat(hid, meta=meta)

    def probe_ended(self, hid: MessageId) -> None:
        """Stop waiting for probe ``hid``'s reply (answered, or given up); a reply that
        still comes is late, and is not answered."""
        self._probes.discard(hid)
        ended = self._ended_probes
        ended[hid] = None
        if len(ended) > _ENDED_PROBES_KEPT:
            ended.popitem(last=False)

    def probe_missed(self, *, periodic: bool) -> bool:
        """A probe got no reply in time: the cartridge is unhealthy. True when the periodic
        probes missed in a row reached ``misses_to_kill`` while it is ready: kill it."""
        self.healthy = False
        self.counters.heartbeat_misses += 1
        if not periodic:
            return False
        self.misses += 1
        limit = self.misses_to_kill
        return limit is not None and self.misses >= limit and self.state is ConnState.READY

    def probe_answered(self, reply: Frame, now: float, *, periodic: bool) -> HealthReport:
        """A probe was answered at ``now``: the cartridge is healthy; what the reply said."""
        self.healthy = True
        self.last_heartbeat = now
        if periodic:
            self.misses = 0
        return self.read_reply(reply)

    def read_reply(self, reply: Frame) -> HealthReport:
        """What a heartbeat reply says; a HEARTBEAT's statistics become :attr:`remote_stats`.
        Pools that are not a JSON object are counted as a protocol error."""
        meta = dict(reply.meta or {})
        if reply.frame_type is not FrameType.HEARTBEAT:
            return HealthReport(None, {}, ErrorReport.from_meta(meta))
        raw = meta.pop("pools", None)
        pools: Mapping[str, Any] | None = None
        if isinstance(raw, bytes | str):
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                pools = parsed
            else:
                self.counters.protocol_errors += 1
        self.remote_stats = meta
        return HealthReport(pools, meta)
