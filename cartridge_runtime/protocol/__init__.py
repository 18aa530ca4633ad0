"""Sans-IO core of Bifaci v6: frames, codec, incremental decoder, limits, checksum,
handshake, sequence numbers and per-request state.

Nothing here does IO, imports anyio or sleeps; time, where it matters, is an argument.

The public names are resolved on first use (a module ``__getattr__`` over the table of
their home submodules): most importers need a few of them, and building every attrs class
and enum of the package up front cost each cartridge process and each command about 70 ms.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives: the submodule imported the first time the name is read.
_HOMES: dict[str, tuple[str, ...]] = {
    "_admission": (
        "CAPACITY_UNLIMITED",
        "POOL_ALL",
        "Pool",
        "PoolAdmission",
        "effective_capacity",
    ),
    "_alloc": (
        "allocator_holders",
        "hold_allocator",
        "release_allocator",
        "trim_heap",
        "tune_allocator",
    ),
    "_call_path": (
        "block_router",
        "compile_response_path",
        "ready",
        "receiver_factory",
        "request_frames",
        "request_wire",
        "response_router",
    ),
    "_cartridge_conn": (
        "REQ_RULES",
        "CartridgeConnection",
    ),
    "_cartridge_state": (
        "PHASE_TRANSITIONS",
        "Admission",
        "Cancelled",
        "CloseInputs",
        "CloseReason",
        "ConnectionClosed",
        "ConnEvent",
        "ConnPhase",
        "CreditSink",
        "HandlerTable",
        "Handshaken",
        "HeartbeatProbe",
        "InputFailed",
        "Notice",
        "PeerRoute",
        "PeerSink",
        "PoolSchedule",
        "RequestAdmitted",
        "RequestPhase",
        "ServedRequest",
        "terminal_frame",
    ),
    "_checksum": (
        "checksum",
        "verify_chunk",
    ),
    "_codec": (
        "decode_body",
        "decode_frame",
        "encode_body",
        "encode_flow",
        "encode_frame",
        "encode_frame_parts",
        "frame_to_map",
        "map_to_frame",
    ),
    "_conn_state": ("ConnState",),
    "_constants": (
        "COALESCE_AGE",
        "COALESCE_BYTES",
        "DEFAULT_INITIAL_CREDIT",
        "DEFAULT_MAX_CHUNK",
        "DEFAULT_MAX_FRAME",
        "DEFAULT_MAX_REORDER_BUFFER",
        "HARD_FRAME_CAP",
        "IDENTITY_CAP",
        "IDENTITY_NONCE_LEN",
        "IDENTITY_STREAM_ID",
        "PREFIX_LEN",
        "PROTOCOL_VERSION",
        "REQ_CONTENT_TYPE",
        "AttributionClass",
        "CreditDirection",
        "ErrorCode",
        "FrameKey",
        "FrameType",
        "NetworkPolicy",
    ),
    "_decoder": ("FrameDecoder",),
    "_errors": (
        "CartridgeRuntimeError",
        "ChecksumMismatchError",
        "CreditViolationError",
        "FrameDecodeError",
        "FrameEncodeError",
        "FrameTooLargeError",
        "FrameTooLargeToSendError",
        "HandshakeError",
        "IdentityCheckError",
        "LocalProtocolError",
        "ProtocolError",
        "RemoteProtocolError",
        "StreamAbandonedError",
        "StreamStateError",
        "VersionMismatchError",
        "map_exceptions",
    ),
    "_events": (
        "BodyEnded",
        "ErrorReport",
        "Event",
        "LogReceived",
        "ProgressReceived",
        "RequestOpened",
        "StreamClosed",
        "StreamData",
        "StreamItem",
        "StreamOpened",
    ),
    "_frame": (
        "ZERO_ID",
        "Frame",
        "MessageId",
    ),
    "_handshake": (
        "CartridgeHello",
        "IdentityCheck",
        "accept_cartridge_hello",
        "accept_host_hello",
    ),
    "_host_conn": (
        "CONN_TRANSITIONS",
        "ConnInput",
        "FrameRefused",
        "HealthReport",
        "HostConnection",
        "HostCounters",
        "HostEvent",
        "PeerRequest",
        "ProbeAnswered",
        "RequesterFlow",
        "RequestFlow",
        "SendFrames",
        "StartupProgress",
    ),
    "_host_startup": (
        "STARTUP_TRANSITIONS",
        "HostHandshake",
        "StartupInput",
        "StartupPhase",
    ),
    "_limits": (
        "DEFAULT_LIMITS",
        "LIMIT_NAMES",
        "Limits",
    ),
    "_outgoing": (
        "OutgoingStream",
        "OutState",
    ),
    "_payload": (
        "SequenceAssembler",
        "decode_scalar",
        "scalar_payloads",
        "sequence_fragments",
        "split_text",
    ),
    "_request_state": (
        "REQUEST_TRANSITIONS",
        "STREAM_TRANSITIONS",
        "BodyReceiver",
        "RequestInput",
        "RequestState",
        "StreamState",
    ),
    "_seq": (
        "FlowKey",
        "SeqAssigner",
    ),
    "_session_path": (
        "compiled_hold",
        "flow_dispatcher",
        "frame_queuer",
        "small_output_paths",
    ),
    "_slotted": ("slotted_maker",),
    "_telemetry": (
        "MAX_TELEMETRY_FIELDS",
        "MAX_TELEMETRY_NAME",
        "METRIC_LEVEL",
        "TRACE_LEVEL",
        "TelemetryError",
        "metric_data",
        "read_metric",
        "read_trace",
        "trace_data",
    ),
    "_validate": (
        "ATTRIBUTION_CLASSES",
        "POLICY_WORDS",
        "validate_frame",
    ),
    "_verbs": (
        "NEED_DATA",
        "PEER_CLOSED",
        "NoEvent",
    ),
}

__all__ = (
    "PoolAdmission",
    "Pool",
    "POOL_ALL",
    "CAPACITY_UNLIMITED",
    "effective_capacity",
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
    "encode_flow",
    "decode_frame",
    "decode_body",
    "frame_to_map",
    "map_to_frame",
    "validate_frame",
    "FrameDecoder",
    "checksum",
    "verify_chunk",
    "tune_allocator",
    "hold_allocator",
    "release_allocator",
    "trim_heap",
    "allocator_holders",
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
    # the verbs every connection core shares
    "NEED_DATA",
    "PEER_CLOSED",
    "NoEvent",
    # the host side of a connection
    "HostConnection",
    "HostHandshake",
    "HostCounters",
    "RequestFlow",
    "RequesterFlow",
    "ConnState",
    "ConnInput",
    "CONN_TRANSITIONS",
    "StartupPhase",
    "StartupInput",
    "STARTUP_TRANSITIONS",
    "HostEvent",
    "SendFrames",
    "PeerRequest",
    "ProbeAnswered",
    "StartupProgress",
    "FrameRefused",
    "HealthReport",
    "block_router",
    "compile_response_path",
    "ready",
    "receiver_factory",
    "request_frames",
    "request_wire",
    "response_router",
    "compiled_hold",
    "flow_dispatcher",
    "frame_queuer",
    "slotted_maker",
    "small_output_paths",
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
    # the cartridge side of a connection
    "CartridgeConnection",
    "ConnPhase",
    "PHASE_TRANSITIONS",
    "CloseReason",
    "RequestPhase",
    "Admission",
    "REQ_RULES",
    "ServedRequest",
    "PeerRoute",
    "HandlerTable",
    "PoolSchedule",
    "CreditSink",
    "PeerSink",
    "ConnEvent",
    "Handshaken",
    "ConnectionClosed",
    "RequestAdmitted",
    "InputFailed",
    "Cancelled",
    "HeartbeatProbe",
    "CloseInputs",
    "Notice",
    "terminal_frame",
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


# A public name that is a submodule itself (the frame builders).
_SUBMODULE_NAMES: dict[str, str] = {"frames": "_builders"}

_EXPORTS: dict[str, str] = {name: home for home, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif name in _SUBMODULE_NAMES:
        value = importlib.import_module(f"{__name__}.{_SUBMODULE_NAMES[name]}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only; names in __all__ re-export
    from . import _builders as frames
    from ._admission import CAPACITY_UNLIMITED, POOL_ALL, Pool, PoolAdmission, effective_capacity
    from ._alloc import (
        allocator_holders,
        hold_allocator,
        release_allocator,
        trim_heap,
        tune_allocator,
    )
    from ._call_path import (
        block_router,
        compile_response_path,
        ready,
        receiver_factory,
        request_frames,
        request_wire,
        response_router,
    )
    from ._cartridge_conn import REQ_RULES, CartridgeConnection
    from ._cartridge_state import (
        PHASE_TRANSITIONS,
        Admission,
        Cancelled,
        CloseInputs,
        CloseReason,
        ConnectionClosed,
        ConnEvent,
        ConnPhase,
        CreditSink,
        HandlerTable,
        Handshaken,
        HeartbeatProbe,
        InputFailed,
        Notice,
        PeerRoute,
        PeerSink,
        PoolSchedule,
        RequestAdmitted,
        RequestPhase,
        ServedRequest,
        terminal_frame,
    )
    from ._checksum import checksum, verify_chunk
    from ._codec import (
        decode_body,
        decode_frame,
        encode_body,
        encode_flow,
        encode_frame,
        encode_frame_parts,
        frame_to_map,
        map_to_frame,
    )
    from ._conn_state import ConnState
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
        ErrorReport,
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
    from ._host_conn import (
        CONN_TRANSITIONS,
        ConnInput,
        FrameRefused,
        HealthReport,
        HostConnection,
        HostCounters,
        HostEvent,
        PeerRequest,
        ProbeAnswered,
        RequesterFlow,
        RequestFlow,
        SendFrames,
        StartupProgress,
    )
    from ._host_startup import STARTUP_TRANSITIONS, HostHandshake, StartupInput, StartupPhase
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
    from ._session_path import compiled_hold, flow_dispatcher, frame_queuer, small_output_paths
    from ._slotted import slotted_maker
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
    from ._verbs import NEED_DATA, PEER_CLOSED, NoEvent
