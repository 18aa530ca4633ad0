"""The relay's errors, under the protocol branch of the one tree."""

from __future__ import annotations

from ..protocol import ErrorCode, LocalProtocolError, RemoteProtocolError

__all__ = ("HostAttachError", "RelayProtocolError")


class RelayProtocolError(RemoteProtocolError):
    """The peer on a relay link broke a relay rule (RLY-*): a frame in the wrong direction,
    a RELAY_NOTIFY the switch cannot read, a POLICY travelling toward the switch. The link
    ends; on the wire the error reads ``PROTOCOL_ERROR`` (class ``internal``)."""

    code = ErrorCode.PROTOCOL_ERROR


class HostAttachError(LocalProtocolError):
    """A host cannot be attached as asked: its id is already attached to a live slot
    (RLY-7). The wiring is wrong, not the peer; nothing was sent."""

    code = ErrorCode.PROTOCOL_VIOLATION
