"""Wire constants of Bifaci v6: frame types, map keys, limits.

Every member cites the rule of ``protocol_spec/`` it comes from.
"""

from __future__ import annotations

import enum

from .._report import AttributionClass as AttributionClass
from .._report import ErrorCode as ErrorCode
from ..urn import IDENTITY_CAP as IDENTITY_CAP

#: The protocol version this package speaks (FRM-*, HSK-*).
PROTOCOL_VERSION = 6

#: Length of the big-endian unsigned length prefix in front of every frame body.
PREFIX_LEN = 4

#: Absolute ceiling for one frame body: no negotiation can raise it (a runaway peer
#: must never make us allocate more than this for one frame).
HARD_FRAME_CAP = 16 * 1024 * 1024

#: Default largest frame body a peer proposes in HELLO.
DEFAULT_MAX_FRAME = 3_670_016
#: Default largest number of *data* bytes per CHUNK (before CBOR wrapping).
DEFAULT_MAX_CHUNK = 262_144
#: Default number of frames a relay may hold per flow while waiting for a seq gap.
DEFAULT_MAX_REORDER_BUFFER = 64
#: Default per-stream credit window, counted in CHUNK frames.
DEFAULT_INITIAL_CREDIT = 32

#: Bytes a scalar byte emission is coalesced to before it is sent as one CHUNK.
COALESCE_BYTES = 4096
#: Age of the oldest coalesced byte after which the next append flushes (seconds).
COALESCE_AGE = 0.020

#: Content type the reference writes on every REQ.
REQ_CONTENT_TYPE = "application/cbor"

#: The identity cap every cartridge serves, before POLICY too: ``IDENTITY_CAP``, defined with
#: the other standard caps in the URN layer and imported above for the handshake.
#: Stream id of the host's identity-check argument.
IDENTITY_STREAM_ID = "identity-verify"
#: Size of the random identity nonce.
IDENTITY_NONCE_LEN = 32


class FrameType(enum.IntEnum):
    """Frame type codes (key 1). Code 2 is retired and never valid (TYP-1)."""

    HELLO = 0  #: handshake, id 0, once per direction
    REQ = 1  #: call a cap
    CHUNK = 3  #: stream data
    END = 4  #: ends a request body or a response (terminal)
    LOG = 5  #: log line or progress, never uses credit
    ERR = 6  #: error (terminal)
    HEARTBEAT = 7  #: health probe and reply
    STREAM_START = 8  #: opens a stream
    STREAM_END = 9  #: closes a stream
    RELAY_NOTIFY = 10  #: host to engine inventory; a cartridge must refuse it
    RELAY_STATE = 11  #: engine to host opaque state; a cartridge must refuse it
    CANCEL = 12  #: cancel a request
    CREDIT = 13  #: grant credit on a stream
    CLOSE_STREAM = 14  #: close a request's live-feed inputs
    POLICY = 15  #: network policy, host to cartridge only

    @property
    def is_flow(self) -> bool:
        """Flow frames are numbered per (rid, xid) flow (TYP-3)."""
        return self in _FLOW

    @property
    def is_terminal(self) -> bool:
        """END and ERR end a flow."""
        return self is FrameType.END or self is FrameType.ERR


_FLOW = frozenset(
    {
        FrameType.REQ,
        FrameType.CHUNK,
        FrameType.END,
        FrameType.LOG,
        FrameType.ERR,
        FrameType.STREAM_START,
        FrameType.STREAM_END,
    }
)


class FrameKey(enum.IntEnum):
    """Integer keys of the frame map (FRM-4)."""

    VERSION = 0
    FRAME_TYPE = 1
    ID = 2
    SEQ = 3
    CONTENT_TYPE = 4
    META = 5
    PAYLOAD = 6
    LEN = 7
    OFFSET = 8
    EOF = 9
    CAP = 10
    STREAM_ID = 11
    MEDIA_URN = 12
    ROUTING_ID = 13
    CHUNK_INDEX = 14
    CHUNK_COUNT = 15
    CHECKSUM = 16
    IS_SEQUENCE = 17
    FORCE_KILL = 18
    CREDIT = 19
    UNBOUNDED = 20
    OUTPUT = 21


class NetworkPolicy(enum.StrEnum):
    """POLICY ``network`` words (HSK-*)."""

    OFFLINE = "offline"  #: refuse every network reach
    NO_TELEMETRY = "no_telemetry"  #: refuse only analytics
    FULL = "full"  #: allow everything


class CreditDirection(enum.StrEnum):
    """CREDIT meta ``credit_dir``: which side's streams the grant is for."""

    REQUEST = "request"  #: credits an argument stream (sent by the handler side)
    RESPONSE = "response"  #: credits a response stream (sent by the requester side)


#: Environment variable that turns the compiled fast paths off (to test or time the pure path).
PURE_PYTHON_ENV = "CARTRIDGE_RUNTIME_PURE_PYTHON"
