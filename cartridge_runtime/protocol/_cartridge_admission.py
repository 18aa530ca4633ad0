"""The rules a cartridge admits a REQ by, and the ERR each refusal answers with, as data.

:data:`REQ_RULES` is checked in order and the first rule that applies decides (a duplicate
id, no cap, a payload on the REQ, a REQ before POLICY, too many open requests); a REQ no rule
refuses is admitted when a handler serves its cap, else refused ``NO_HANDLER`` (REQ-4).
:func:`refusal_frame` builds the ERR of every refusal but the duplicate, which fails the
request already open instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol

from . import _builders as frames
from ._cartridge_state import Admission
from ._constants import AttributionClass, ErrorCode
from ._frame import Frame

__all__ = ("REQ_RULES", "AdmittingSide", "ReqRule", "refusal_frame")


class AdmittingSide(Protocol):
    """What the rules read of the connection a REQ arrives on."""

    @property
    def requests(self) -> Collection[Any]: ...
    @property
    def policy(self) -> Any: ...
    @property
    def handlers(self) -> Any: ...
    @property
    def max_open_requests(self) -> int: ...


def _duplicate(conn: AdmittingSide, frame: Frame) -> bool:
    return frame.id in conn.requests


def _no_cap(conn: AdmittingSide, frame: Frame) -> bool:
    return frame.cap is None


def _payload(conn: AdmittingSide, frame: Frame) -> bool:
    return bool(frame.payload)  # REQ-3


def _before_policy(conn: AdmittingSide, frame: Frame) -> bool:
    return conn.policy is None and not conn.handlers.is_identity(frame.cap or "")  # HSK-16, HSK-20


def _too_many(conn: AdmittingSide, frame: Frame) -> bool:
    return len(conn.requests) >= conn.max_open_requests


#: A REQ rule: the outcome it gives, and whether it applies to a REQ.
ReqRule = tuple[Admission, Callable[[AdmittingSide, Frame], bool]]

#: The rules a REQ is checked against, in order; the first that applies decides. A REQ no
#: rule refuses is admitted if a handler serves its cap (else ``NO_HANDLER``, REQ-4).
REQ_RULES: tuple[ReqRule, ...] = (
    (Admission.DUPLICATE, _duplicate),
    (Admission.NO_CAP, _no_cap),
    (Admission.PAYLOAD, _payload),
    (Admission.BEFORE_POLICY, _before_policy),
    (Admission.TOO_MANY, _too_many),
)


def no_rule_applies(conn: AdmittingSide, frame: Frame) -> bool:
    """Whether no rule of :data:`REQ_RULES` can apply to REQ ``frame``, told in one step (the
    common REQ: a new id, a cap, no payload, after POLICY, room for it); when ``False`` the
    rules themselves decide."""
    requests = conn.requests
    return (
        frame.cap is not None
        and not frame.payload
        and conn.policy is not None
        and frame.id not in requests
        and len(requests) < conn.max_open_requests
    )


#: The ERR of each refusal: its code, class and message (``{cap}`` and ``{limit}`` filled in).
_REFUSALS: dict[Admission, tuple[ErrorCode, AttributionClass, str]] = {
    Admission.NO_CAP: (
        ErrorCode.INVALID_REQUEST,
        AttributionClass.INTERNAL,
        "REQ without a cap URN (key 10)",
    ),
    Admission.PAYLOAD: (
        ErrorCode.PROTOCOL_ERROR,
        AttributionClass.INTERNAL,
        "REQ payload must be empty; arguments travel as streams",
    ),
    Admission.BEFORE_POLICY: (
        ErrorCode.PROTOCOL_VIOLATION,
        AttributionClass.INTERNAL,
        "REQ before POLICY: only the identity check may come first",
    ),
    Admission.TOO_MANY: (
        ErrorCode.TOO_MANY_REQUESTS,
        AttributionClass.RESOURCE,
        "too many open requests (at most {limit}); retry when some have ended",
    ),
    Admission.NO_HANDLER: (
        ErrorCode.NO_HANDLER,
        AttributionClass.ENVIRONMENT,
        "No handler registered for cap: {cap}",
    ),
}


def refusal_frame(frame: Frame, outcome: Admission, max_open_requests: int) -> Frame:
    """The ERR refusing REQ ``frame`` for ``outcome`` (any but :attr:`Admission.DUPLICATE`)."""
    code, cls, text = _REFUSALS[outcome]
    message = text.format(cap=frame.cap, limit=max_open_requests)
    return frames.err(frame.id, code, message, cls, xid=frame.routing_id)
