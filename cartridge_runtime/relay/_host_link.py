"""The host's side of a relay link as a sans-IO core: what each frame from the switch means.

Rules first:

1. The host announces itself with RELAY_NOTIFY and again whenever its inventory changes
   (RLY-2); it keeps a RELAY_STATE payload and never forwards it (RLY-4).
2. It routes no REQ before the switch gave it a POLICY: such a REQ is answered with ERR
   ``PROTOCOL_VIOLATION`` (class ``internal``, HST-8).
3. HELLO and RELAY_NOTIFY from the switch, and POLICY, RELAY_STATE or HELLO on their way to
   the switch, break the link (RLY-9).

The shell owns what a request is routed to; this core says which requests are open (those
the switch sent, and the peer calls the host's cartridges sent up) and classifies each frame.
"""

from __future__ import annotations

from collections import deque

import attrs

from ..protocol import (
    AttributionClass,
    ErrorCode,
    Frame,
    FrameType,
    Limits,
    LocalProtocolError,
    MessageId,
    NetworkPolicy,
    frames,
)
from ._errors import RelayProtocolError
from ._inventory import relay_notify

__all__ = (
    "Absorbed",
    "ForPeerCall",
    "ForRequest",
    "HostLink",
    "HostLinkEvent",
    "OpenRequest",
    "PolicyChanged",
    "Refuse",
    "StateKept",
    "Unrouted",
)

#: Ended request ids remembered to tell a straggler from a drop.
RECENT_ENDED = 256


@attrs.frozen
class PolicyChanged:
    """The switch set the network policy: give it to every cartridge."""

    policy: NetworkPolicy


@attrs.frozen
class StateKept:
    """The switch sent its resources payload; kept, never forwarded."""

    payload: bytes


@attrs.frozen
class Absorbed:
    """A frame the host takes no action on (a HEARTBEAT or LOG from the switch)."""

    frame: Frame


@attrs.frozen
class OpenRequest:
    """A REQ to route to a cartridge (the shell opens its route)."""

    frame: Frame


@attrs.frozen
class ForRequest:
    """A frame of an open request the switch sent."""

    frame: Frame


@attrs.frozen
class ForPeerCall:
    """A frame of the response to a peer call a cartridge of this host made."""

    frame: Frame


@attrs.frozen
class Refuse:
    """Answer the switch with ``reply`` (an ERR) instead of routing."""

    reply: Frame


@attrs.frozen
class Unrouted:
    """A frame for no open request; ``straggler`` when its request ended a moment ago."""

    frame: Frame
    straggler: bool


HostLinkEvent = (
    PolicyChanged
    | StateKept
    | Absorbed
    | OpenRequest
    | ForRequest
    | ForPeerCall
    | Refuse
    | Unrouted
)

#: The frames of an open request the switch sends after its REQ (HEARTBEAT and LOG from the
#: switch are absorbed, never forwarded).
_REQUEST_BODY = frozenset(
    {
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.END,
        FrameType.ERR,
        FrameType.CREDIT,
        FrameType.CANCEL,
        FrameType.CLOSE_STREAM,
    }
)
_TERMINAL = frozenset({FrameType.END, FrameType.ERR})
_FROM_SWITCH_FORBIDDEN = frozenset({FrameType.HELLO, FrameType.RELAY_NOTIFY})
_TO_SWITCH_FORBIDDEN = frozenset({FrameType.HELLO, FrameType.RELAY_STATE, FrameType.POLICY})


class HostLink:
    """One relay link, host side (see the module docstring)."""

    def __init__(self) -> None:
        #: The switch's policy, once it sent one.
        self.policy: NetworkPolicy | None = None
        #: The last RELAY_STATE payload.
        self.state = b""
        self._requests: set[MessageId] = set()
        self._peer_calls: set[MessageId] = set()
        self._ended: deque[MessageId] = deque(maxlen=RECENT_ENDED)
        self._announced: tuple[bytes, Limits] | None = None
        #: Frames that found no open request, by kind.
        self.drops = 0
        self.stragglers = 0

    # -- announcements ----------------------------------------------------------------------

    def announce(self, manifest: bytes, limits: Limits, *, force: bool = False) -> Frame | None:
        """The RELAY_NOTIFY for this inventory, or ``None`` when it was announced already."""
        if not force and self._announced == (manifest, limits):
            return None
        self._announced = (manifest, limits)
        return relay_notify(manifest, limits)

    # -- from the switch --------------------------------------------------------------------

    def is_request_frame(self, frame: Frame) -> bool:
        """Whether ``frame`` is a body frame of a request the switch opened, the common case:
        :meth:`receive` would answer :class:`ForRequest` (the shell forwards it without the
        event object)."""
        return frame.frame_type in _REQUEST_BODY and frame.id in self._requests

    def receive(self, frame: Frame) -> HostLinkEvent:
        """Classify a frame from the switch.

        :raises RelayProtocolError: HELLO or RELAY_NOTIFY from the switch, or a POLICY whose
            word is unknown.
        """
        kind = frame.frame_type
        if kind is FrameType.POLICY:
            word = (frame.meta or {}).get("network")
            try:
                self.policy = NetworkPolicy(str(word))
            except ValueError:
                raise RelayProtocolError(f"POLICY with an unknown network word {word!r}") from None
            return PolicyChanged(self.policy)
        if kind is FrameType.RELAY_STATE:
            self.state = bytes(frame.payload or b"")
            return StateKept(self.state)
        if kind in _FROM_SWITCH_FORBIDDEN:
            raise RelayProtocolError(f"{kind.name} from the switch: it never travels to a host")
        if kind in (FrameType.HEARTBEAT, FrameType.LOG):
            return Absorbed(frame)
        rid = frame.id
        if kind is FrameType.REQ:
            if self.policy is None:
                return Refuse(
                    frames.err(
                        rid,
                        ErrorCode.PROTOCOL_VIOLATION,
                        f"request for {frame.cap!r} reached a host that has no policy yet: "
                        "the switch sends POLICY before it routes anything",
                        AttributionClass.INTERNAL,
                        xid=frame.routing_id,
                    )
                )
            if rid in self._requests:
                return Refuse(
                    frames.err(
                        rid,
                        ErrorCode.PROTOCOL_VIOLATION,
                        "a REQ reused the id of a request still open on this host",
                        AttributionClass.INTERNAL,
                        xid=frame.routing_id,
                    )
                )
            self._requests.add(rid)
            return OpenRequest(frame)
        if rid in self._requests:
            return ForRequest(frame)
        if rid in self._peer_calls:
            if kind in _TERMINAL:
                self._close(self._peer_calls, rid)
            return ForPeerCall(frame)
        straggler = rid in self._ended
        if straggler:
            self.stragglers += 1
        else:
            self.drops += 1
        return Unrouted(frame, straggler)

    # -- toward the switch ------------------------------------------------------------------

    def sending(self, frame: Frame) -> None:
        """Check a frame about to go to the switch and note what it opens or ends: a REQ
        opens a peer call; a terminal frame of a request ends that request.

        :raises LocalProtocolError: POLICY, RELAY_STATE or HELLO toward the switch.
        """
        kind = frame.frame_type
        if kind in _TO_SWITCH_FORBIDDEN:
            raise LocalProtocolError(f"{kind.name} never travels toward the switch")
        if kind is FrameType.REQ:
            self._peer_calls.add(frame.id)
        elif kind in _TERMINAL and frame.id in self._requests:
            self._close(self._requests, frame.id)

    def ended(self, rid: MessageId) -> None:
        """The route of ``rid`` ended without a terminal frame through :meth:`sending`."""
        self._close(self._requests, rid)
        self._close(self._peer_calls, rid)

    @property
    def open_requests(self) -> int:
        """Requests from the switch not ended yet."""
        return len(self._requests)

    def _close(self, table: set[MessageId], rid: MessageId) -> None:
        if rid in table:
            table.discard(rid)
            self._ended.append(rid)
