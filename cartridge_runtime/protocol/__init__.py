"""Sans-IO core of Bifaci v6: frames, codec, incremental decoder, limits, checksum,
handshake, sequence numbers and per-request state.

Nothing here does IO, imports anyio or sleeps; time, where it matters, is an argument.
"""

from . import _builders as frames
from ._alloc import tune_allocator
from ._checksum import checksum, verify_chunk
from ._codec import (
    decode_body,
    decode_frame,
    encode_body,
    encode_frame,
    encode_frame_parts,
    frame_to_map,
    map_to_frame,
)
from ._constants import (
    COALESCE_AGE,
    COALESCE_BYTES,
    DEFAULT_INITIAL_CREDIT,
    DEFAULT_MAX_CHUNK,
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_REORDER_BUFFER,
    HARD_FRAME_CAP,
    IDENTITY_CAP,
    IDENTITY_NONCE_LEN,
    IDENTITY_STREAM_ID,
    PREFIX_LEN,
    PROTOCOL_VERSION,
    REQ_CONTENT_TYPE,
    AttributionClass,
    CreditDirection,
    ErrorCode,
    FrameKey,
    FrameType,
    NetworkPolicy,
)
from ._decoder import FrameDecoder
from ._error_report import ErrorReport
from ._errors import (
    CartridgeRuntimeError,
    ChecksumMismatchError,
    CreditViolationError,
    FrameDecodeError,
    FrameEncodeError,
    FrameTooLargeError,
    FrameTooLargeToSendError,
    HandshakeError,
    IdentityCheckError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    StreamAbandonedError,
    StreamStateError,
    VersionMismatchError,
    map_exceptions,
)
from ._events import (
    BodyEnded,
    Event,
    LogReceived,
    ProgressReceived,
    RequestOpened,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
)
from ._frame import ZERO_ID, Frame, MessageId
from ._handshake import CartridgeHello, IdentityCheck, accept_cartridge_hello, accept_host_hello
from ._limits import DEFAULT_LIMITS, LIMIT_NAMES, Limits
from ._outgoing import OutgoingStream, OutState
from ._payload import (
    SequenceAssembler,
    decode_scalar,
    scalar_payloads,
    sequence_fragments,
    split_text,
)
from ._request_state import (
    REQUEST_TRANSITIONS,
    STREAM_TRANSITIONS,
    BodyReceiver,
    RequestInput,
    RequestState,
    StreamState,
)
from ._seq import FlowKey, SeqAssigner
from ._telemetry import (
    MAX_TELEMETRY_FIELDS,
    MAX_TELEMETRY_NAME,
    METRIC_LEVEL,
    TRACE_LEVEL,
    TelemetryError,
    metric_data,
    read_metric,
    read_trace,
    trace_data,
)
from ._validate import ATTRIBUTION_CLASSES, POLICY_WORDS, validate_frame

__all__ = (
    # model
    "Frame",
    "MessageId",
    "ZERO_ID",
    "FrameType",
    "FrameKey",
    "AttributionClass",
    "ErrorCode",
    "NetworkPolicy",
    "CreditDirection",
    "frames",
    # metrics and trace events in LOG frames (REQ-39)
    "METRIC_LEVEL",
    "TRACE_LEVEL",
    "MAX_TELEMETRY_NAME",
    "MAX_TELEMETRY_FIELDS",
    "TelemetryError",
    "metric_data",
    "trace_data",
    "read_metric",
    "read_trace",
    # codec
    "encode_frame",
    "encode_body",
    "encode_frame_parts",
    "decode_frame",
    "decode_body",
    "frame_to_map",
    "map_to_frame",
    "validate_frame",
    "FrameDecoder",
    "checksum",
    "verify_chunk",
    "tune_allocator",
    # limits and handshake
    "Limits",
    "DEFAULT_LIMITS",
    "LIMIT_NAMES",
    "CartridgeHello",
    "IdentityCheck",
    "accept_host_hello",
    "accept_cartridge_hello",
    "SeqAssigner",
    "FlowKey",
    # per-request state
    "BodyReceiver",
    "RequestState",
    "StreamState",
    "RequestInput",
    "REQUEST_TRANSITIONS",
    "STREAM_TRANSITIONS",
    "OutgoingStream",
    "OutState",
    "Event",
    "RequestOpened",
    "StreamOpened",
    "StreamData",
    "StreamItem",
    "StreamClosed",
    "LogReceived",
    "ProgressReceived",
    "BodyEnded",
    "ErrorReport",
    # payloads
    "decode_scalar",
    "scalar_payloads",
    "sequence_fragments",
    "split_text",
    "SequenceAssembler",
    # errors
    "CartridgeRuntimeError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "FrameDecodeError",
    "FrameEncodeError",
    "FrameTooLargeError",
    "FrameTooLargeToSendError",
    "ChecksumMismatchError",
    "HandshakeError",
    "VersionMismatchError",
    "IdentityCheckError",
    "StreamStateError",
    "CreditViolationError",
    "StreamAbandonedError",
    "map_exceptions",
    # constants
    "PROTOCOL_VERSION",
    "PREFIX_LEN",
    "HARD_FRAME_CAP",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_MAX_CHUNK",
    "DEFAULT_MAX_REORDER_BUFFER",
    "DEFAULT_INITIAL_CREDIT",
    "COALESCE_BYTES",
    "COALESCE_AGE",
    "REQ_CONTENT_TYPE",
    "IDENTITY_CAP",
    "IDENTITY_STREAM_ID",
    "IDENTITY_NONCE_LEN",
    "ATTRIBUTION_CLASSES",
    "POLICY_WORDS",
)
