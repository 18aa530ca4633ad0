"""The data of the cartridge side's connection: states, per-request records, events.

What :class:`~cartridge_runtime.protocol.CartridgeConnection` keeps and reports: the
:class:`~._conn_state.ConnState` of the connection (the host side's vocabulary) and
:class:`RequestPhase` of each request, the record of an incoming request
(:class:`ServedRequest`) and of an outgoing peer call (:class:`PeerRoute`), the events
:meth:`~cartridge_runtime.protocol.CartridgeConnection.receive` returns, the narrow interfaces
it is given (:class:`HandlerTable`, :class:`PoolSchedule`, :class:`CreditSink`,
:class:`PeerSink`), and the pure decision of a request's terminal, :func:`terminal_frame` (the
terminal order, REQ-27). A cancel's ERR is :meth:`ErrorReport.for_cancel`.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar, cast

import attrs

from . import _builders as frames
from ._conn_state import ConnState
from ._constants import PURE_PYTHON_ENV, AttributionClass, CreditDirection
from ._errors import ProtocolError
from ._events import ErrorReport, Event
from ._frame import Frame, MessageId
from ._limits import Limits
from ._request_state import BodyReceiver, RequestState
from ._slotted import slotted_maker
from ._validate import ATTRIBUTION_CLASSES

H = TypeVar("H")
H_co = TypeVar("H_co", covariant=True)
T = TypeVar("T")


#: The cartridge side's name for :class:`~._conn_state.ConnState` (one vocabulary for both
#: sides: ``STARTING`` until the HELLO exchange, ``READY`` while serving, ``DEAD`` once closed).
ConnPhase = ConnState

#: The states each state may move to (HSK-2: nothing but HELLO before the exchange).
PHASE_TRANSITIONS: Mapping[ConnState, frozenset[ConnState]] = {
    ConnState.STARTING: frozenset({ConnState.READY, ConnState.DEAD}),
    ConnState.READY: frozenset({ConnState.DEAD}),
    ConnState.DEAD: frozenset(),
}


class CloseReason(enum.Enum):
    """Why a connection ended; the runtime maps each to its exit status."""

    END_OF_INPUT = "the host closed its side"
    HANDSHAKE_FAILED = "handshake failed"
    RELAY_FRAME = "a relay frame reached the cartridge"
    BROKEN_STREAM = "the byte stream can no longer be trusted"
    FORCE_KILLED = "a CANCEL with force_kill"


class RequestPhase(enum.Enum):
    """Where one incoming request is (it leaves the connection's table when it is done)."""

    QUEUED = "queued for a pool slot"
    RUNNING = "running"
    DONE = "done"


class Admission(enum.Enum):
    """The outcome of the REQ rules (:data:`REQ_RULES`)."""

    ADMITTED = "admitted"
    DUPLICATE = "a second REQ for an open request"
    NO_CAP = "no cap URN"
    PAYLOAD = "non-empty payload"
    BEFORE_POLICY = "before POLICY"
    TOO_MANY = "too many open requests"
    NO_HANDLER = "no handler"


class HandlerTable(Protocol[H_co]):
    """What the connection needs of the cartridge's registrations."""

    def find_handler(self, cap_urn: str) -> tuple[str, H_co] | None:
        """The registered URN serving ``cap_urn`` and its handler, or ``None``."""
        ...

    def is_identity(self, cap_urn: str) -> bool:
        """Whether ``cap_urn`` is the identity cap (served before POLICY too, HSK-16)."""
        ...

    def pool_name(self, handler_urn: str) -> str:
        """The name of a handler's own pool (its canonical cap URN)."""
        ...


class PoolSchedule(Protocol[T]):
    """The pool table that admits requests (``manifest.PoolTable``, built on
    :class:`~cartridge_runtime.protocol._admission.PoolAdmission`, has this shape)."""

    def arrive(self, cap: str, item: T) -> int | None: ...
    def release(self, cap: str) -> None: ...
    def admit_next(self) -> tuple[str, T] | None: ...
    def remove_queued(self, matches: Callable[[T], bool]) -> T | None: ...
    def apply_desired_json(self, data: bytes | str) -> None:
        """:raises ValueError: malformed, or an unknown pool (answered ``UNKNOWN_POOL``)."""
        ...

    def to_json_bytes(self) -> bytes: ...


class CreditSink(Protocol):
    """An outgoing stream that takes credit grants (the runtime's output backend)."""

    def grant(self, n: int) -> None: ...


class PeerSink(Protocol):
    """Where the events of a peer call's response go; ``credit`` is 1 for each data event
    whose consumption returns a credit."""

    def deliver(self, event: Event | ProtocolError, credit: int = 0) -> None: ...


class ServedRequest(Generic[H]):
    """The connection's record of one incoming request (queued or running)."""

    __slots__ = (
        "cancel",
        "cap",
        "handler",
        "handler_urn",
        "input_error",
        "outputs",
        "peer_ids",
        "phase",
        "pool",
        "receiver",
        "rid",
        "terminal_sent",
        "xid",
    )

    def __init__(
        self,
        rid: MessageId,
        xid: MessageId | None,
        cap: str,
        handler_urn: str,
        handler: H,
        pool: str,
        initial_credit: int,
    ) -> None:
        self.rid = rid
        self.xid = xid
        self.cap = cap
        self.handler_urn = handler_urn
        self.handler = handler
        self.pool = pool
        self.receiver = BodyReceiver(rid, xid=xid, initial_credit=initial_credit, expect_req=True)
        self.phase = RequestPhase.QUEUED
        #: The ERR a cancel chose; it wins over everything else (REQ-27).
        self.cancel: ErrorReport | None = None
        #: The rule the requester's frames broke; the handler's input failed with it.
        self.input_error: ProtocolError | None = None
        self.terminal_sent = False
        #: Outgoing streams of the response, by stream id (CREDIT targets).
        self.outputs: dict[str, CreditSink] = {}
        #: Request ids of this request's own peer calls (cancelled with it, FLW-18).
        self.peer_ids: list[MessageId] = []

    def __repr__(self) -> str:
        return f"ServedRequest(rid={self.rid}, cap={self.cap!r}, phase={self.phase.name})"

    @property
    def started(self) -> bool:
        return self.phase is not RequestPhase.QUEUED


class PeerRoute:
    """The connection's record of one outgoing peer call."""

    __slots__ = ("cancel_sent", "outputs", "parent", "receiver", "rid", "sink")

    def __init__(self, rid: MessageId, parent: MessageId, sink: PeerSink, credit: int) -> None:
        self.rid = rid
        self.parent = parent
        self.sink = sink
        #: Whether a CANCEL for the call was made (the parent's end sends none again).
        self.cancel_sent = False
        self.receiver = BodyReceiver(rid, initial_credit=credit, expect_req=False)
        #: Argument streams of the call, by stream id (CREDIT targets).
        self.outputs: dict[str, CreditSink] = {}


# -- events ------------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Handshaken:
    """The HELLO exchange is done: send :attr:`hello` first (it is not in the outbox)."""

    limits: Limits
    hello: Frame


@attrs.frozen(slots=True)
class ConnectionClosed:
    """The connection is over; ``message`` says why for the cartridge's stderr."""

    reason: CloseReason
    message: str


@attrs.frozen(slots=True)
class RequestAdmitted(Generic[H]):
    """A REQ was admitted: start its handler now, or (``queued``) when the pool admits it."""

    request: ServedRequest[H]
    queued: bool


@attrs.frozen(slots=True)
class InputFailed:
    """The requester broke a rule for request ``rid``: its input fails with ``error``; a
    running handler is to be cancelled (a queued request was answered already)."""

    rid: MessageId
    error: ProtocolError


@attrs.frozen(slots=True)
class Cancelled:
    """CANCEL for request ``rid``: a running handler is to be cancelled (a queued request was
    answered already); ``closed`` is set when the CANCEL had force_kill, which ends the
    connection after the cancel's ERR (FLW-20)."""

    rid: MessageId
    running: bool
    closed: ConnectionClosed | None = None


@attrs.frozen(slots=True)
class HeartbeatProbe:
    """A HEARTBEAT: answer it (:meth:`CartridgeConnection.heartbeat_reply`) and start the
    requests its capacity change admitted (:meth:`CartridgeConnection.dequeued`)."""

    hid: MessageId
    admitted: tuple[ServedRequest[Any], ...]


@attrs.frozen(slots=True)
class CloseInputs:
    """CLOSE_STREAM for request ``rid``: end its live-feed inputs (only ``stream_id`` when
    given; FLW-22)."""

    rid: MessageId
    stream_id: str | None


@attrs.frozen(slots=True)
class Notice:
    """A frame was ignored; ``message`` is worth a line on the cartridge's stderr."""

    message: str


#: What :meth:`CartridgeConnection.receive` returns: ``None`` (nothing beyond the outbox), the
#: receiver events of a frame of request ``frame.id`` (a ``list``), or one of these.
ConnEvent = (
    list[Event]
    | Handshaken
    | ConnectionClosed
    | RequestAdmitted[Any]
    | InputFailed
    | Cancelled
    | HeartbeatProbe
    | CloseInputs
    | Notice
    | None
)


def terminal_frame(
    request: ServedRequest[Any],
    failure: ErrorReport | None,
    progress: float = 1.0,
    message: str | None = None,
) -> Frame:
    """The one terminal of a request (REQ-27): the cancel's ERR, else the input error's ERR,
    else the handler's ERR (``failure``), else END with ``progress`` and ``message``."""
    rid, xid = request.rid, request.xid
    cancel = request.cancel
    if cancel is not None:
        return frames.err(rid, cancel.code, cancel.message, cancel.attribution_class, xid=xid)
    exc = request.input_error
    if exc is not None:
        return frames.err(rid, str(exc.code), str(exc), AttributionClass.INTERNAL, xid=xid)
    if failure is not None:
        cls = failure.attribution_class
        return frames.err(
            rid,
            failure.code,
            failure.message,
            cls if cls in ATTRIBUTION_CLASSES else AttributionClass.INTERNAL,
            arg_urn=failure.arg_urn,
            xid=xid,
        )
    if _c_end is not None and (end := _c_end(rid, xid, progress, message)) is not None:
        return cast("Frame", end)  # the same frame, in one C call once the session set it up
    return frames.end(rid, xid=xid, progress=progress, message=message)


def _compiled_end() -> Any:
    """``_speedups.end_frame``, or ``None`` when not built or switched off."""
    if os.environ.get(PURE_PYTHON_ENV):
        return None
    try:
        from ._speedups import end_frame
    except ImportError:  # pragma: no cover - the extension is optional
        return None
    return end_frame


_c_end = _compiled_end()


def _compiled_served() -> Callable[..., ServedRequest[Any]]:
    """What makes a :class:`ServedRequest`: ``_speedups.new_served`` (the same record, its
    slots and its receiver's dict set as the two ``__init__`` set them, in one C call), or
    the class itself when the extension is not built, switched off, or refused the classes."""
    if os.environ.get(PURE_PYTHON_ENV):
        return ServedRequest
    try:
        from ._speedups import configure_served, new_served
    except ImportError:  # pragma: no cover - the extension is optional
        return ServedRequest
    try:
        configure_served(
            ServedRequest,
            BodyReceiver,
            RequestPhase.QUEUED,
            RequestState.EXPECT_REQ,
            CreditDirection.REQUEST,
        )
    except (TypeError, ValueError):  # pragma: no cover - a class changed its fields
        return ServedRequest
    make: Callable[..., ServedRequest[Any]] = new_served
    return make


#: ``new_served_request(rid, xid, cap, handler_urn, handler, pool, initial_credit)``: a
#: :class:`ServedRequest` made as ``ServedRequest(...)`` makes it (see :func:`_compiled_served`).
new_served_request = _compiled_served()


#: ``new_admitted(request, queued)``: a :class:`RequestAdmitted`, in one C call when compiled.
new_admitted: Callable[[ServedRequest[Any], bool], RequestAdmitted[Any]] = (
    slotted_maker(RequestAdmitted, ("request", "queued")) or RequestAdmitted
)
