"""Events a :class:`BodyReceiver` reports for the frames of one request or response, and the
package's one ERR value, :class:`ErrorReport`.

An ERR frame is reported as an :class:`ErrorReport`, and every other place of the package that
holds an ERR holds this value too: the reason a cancelled request ends with
(:meth:`ErrorReport.for_cancel`), what a harness call, an engine observer and a conformance
check report, and what every error of the package's tree describes itself as
(``error.report``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._redact import describe, describe_meta
from ._constants import AttributionClass, ErrorCode
from ._frame import MessageId


@attrs.frozen(slots=True, kw_only=True)
class RequestOpened:
    """A REQ arrived: the request ``rid`` calls ``cap``."""

    rid: MessageId
    xid: MessageId | None
    cap: str | None
    payload: bytes | None = None


@attrs.frozen(slots=True, kw_only=True)
class StreamOpened:
    """A STREAM_START: a new stream with its media URN and mode."""

    stream_id: str
    media_urn: str
    is_sequence: bool = False
    unbounded: bool = False
    output: str | None = None
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)


@attrs.frozen(slots=True, kw_only=True)
class StreamData:
    """One scalar-mode chunk, decoded: a single CBOR value (bytes, text, list element...).

    ``wire`` is ``(checksum, payload length)`` of the CHUNK once its checksum was verified, so
    that whoever forwards the value unchanged need not hash it again (``None`` when checksums
    are not verified).
    """

    stream_id: str
    value: Any = attrs.field(repr=describe)
    wire: tuple[int, int] | None = attrs.field(default=None, repr=False, eq=False)


@attrs.frozen(slots=True, kw_only=True)
class StreamItem:
    """One whole sequence-mode item with the per-item meta of its first fragment."""

    stream_id: str
    value: Any = attrs.field(repr=describe)
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)


@attrs.frozen(slots=True, kw_only=True)
class StreamClosed:
    """A STREAM_END; ``chunk_count`` is ``None`` for unbounded streams."""

    stream_id: str
    chunk_count: int | None


@attrs.frozen(slots=True, kw_only=True)
class LogReceived:
    """A non-progress LOG.

    :ivar data: for level ``metric`` or ``trace``, the meta value under that key (REQ-39),
        unchecked; else ``None``.
    """

    level: str
    message: str
    attribution_class: str | None = None
    arg_urn: str | None = None
    data: Any = None


@attrs.frozen(slots=True, kw_only=True)
class ProgressReceived:
    """A progress LOG (``level == "progress"``).

    :ivar indeterminate: the sender said how far it is is unknown (meta ``indeterminate``);
        ``progress`` is then the last fraction it reported.
    """

    progress: float
    message: str = ""
    indeterminate: bool = False


@attrs.frozen(slots=True, kw_only=True)
class BodyEnded:
    """END: the request body (or the response) is complete."""

    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)

    @property
    def progress(self) -> float | None:
        p = (self.meta or {}).get("progress")
        return float(p) if p is not None else None

    @property
    def message(self) -> str | None:
        return (self.meta or {}).get("message")


_CODES: Final[Mapping[str, ErrorCode]] = {code.value: code for code in ErrorCode}
_CLASSES: Final[Mapping[str, AttributionClass]] = {cls.value: cls for cls in AttributionClass}

#: The message of the ERR that ends a request cancelled without a reason (FLW-18).
_CANCELLED_MESSAGE: Final = "Request cancelled"
#: What the ERR's message says before the host's text, for the two abort codes (FLW-18).
_ABORT_PREFIXES: Final[Mapping[str, str]] = {
    ErrorCode.ABORTED: "Request aborted by the host: ",
    ErrorCode.ABORTED_COLLATERAL: (
        "Request aborted as collateral of a failure elsewhere in the run: "
    ),
}


def as_error_code(code: str) -> str:
    """``code`` as its :class:`ErrorCode` member when it is a well-known code, else unchanged
    (handlers may use codes of their own, ERR-4)."""
    return _CODES.get(code, code)


def as_attribution_class(word: str) -> str:
    """``word`` as its :class:`AttributionClass` member when it is one, else unchanged (a peer
    may send a word ERR-1 does not allow; the report keeps what travelled)."""
    return _CLASSES.get(word, word)


@attrs.frozen(slots=True, kw_only=True)
class ErrorReport:
    """An ERR: why a request failed (ERR-1, ERR-2, REQ-30).

    ``code`` is an :class:`ErrorCode` member when the code is a well-known one, and
    ``attribution_class`` an :class:`AttributionClass` member when the word is one; both stay
    the text that travelled otherwise (both enums are ``StrEnum``: equal to, and written as,
    their text). :attr:`attribution` reads the class as the enum, an unknown word counting as
    ``internal``.
    """

    code: str = attrs.field(converter=as_error_code)
    attribution_class: str = attrs.field(converter=as_attribution_class)
    message: str
    arg_urn: str | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any] | None) -> ErrorReport:
        """The report an ERR frame's meta map carries (missing keys read as empty)."""
        meta = meta or {}
        return cls(
            code=str(meta.get("code") or ""),
            attribution_class=str(meta.get("attribution_class") or AttributionClass.INTERNAL),
            message=str(meta.get("message") or ""),
            arg_urn=meta.get("arg_urn"),
        )

    @classmethod
    def for_cancel(cls, meta: Mapping[str, Any] | None) -> ErrorReport:
        """The ERR that ends a request its peer cancelled, from the CANCEL's meta (the table of
        FLW-18: no meta is ``CANCELLED``/``internal``; ``ABORTED`` and ``ABORTED_COLLATERAL``
        wrap the host's text; any other code is kept with its message; an attribution class
        that is missing or not an ERR-1 word becomes ``internal``)."""
        if not isinstance(meta, Mapping) or not meta:
            return cls(
                code=ErrorCode.CANCELLED,
                attribution_class=AttributionClass.INTERNAL,
                message=_CANCELLED_MESSAGE,
            )
        code = as_error_code(str(meta.get("code") or ErrorCode.CANCELLED))
        attribution = _CLASSES.get(str(meta.get("attribution_class") or ""))
        detail = str(meta.get("message") or "")
        prefix = _ABORT_PREFIXES.get(code)
        if prefix is not None:
            message = prefix + detail
        elif code == ErrorCode.CANCELLED and not detail:
            message = _CANCELLED_MESSAGE
        else:
            message = detail or str(code)
        return cls(
            code=code,
            attribution_class=attribution or AttributionClass.INTERNAL,
            message=message,
        )

    @property
    def attribution(self) -> AttributionClass:
        """The attribution class as the enum (an unknown word counts as ``internal``)."""
        return _CLASSES.get(self.attribution_class, AttributionClass.INTERNAL)

    @property
    def retryable(self) -> bool:
        """Whether a retry can help, by attribution class (ERR-2)."""
        return self.attribution.retryable

    def for_sending(self) -> ErrorReport:
        """This report as this side writes it: an attribution class ERR-1 does not allow
        becomes ``internal`` (a receiver refuses any other word)."""
        if self.attribution_class in _CLASSES:
            return self
        return attrs.evolve(self, attribution_class=AttributionClass.INTERNAL)

    def one_line(self) -> str:
        """``CODE (class): message`` on one line (the message's first line), as a CLI
        prints a failure."""
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.code} ({self.attribution_class}): {first}"

    def to_meta(self) -> dict[str, Any]:
        """The ERR frame's meta map for this report (:func:`err_meta`)."""
        return err_meta(self.code, self.attribution_class, self.message, self.arg_urn)


def err_meta(
    code: str, attribution_class: str, message: str, arg_urn: str | None = None
) -> dict[str, Any]:
    """An ERR frame's meta map, in wire key order (REQ-30): ``message`` falls back to the code,
    ``arg_urn`` is written only when there is one."""
    meta: dict[str, Any] = {
        "code": str(code),
        "attribution_class": str(attribution_class),
        "message": message or str(code),
    }
    if arg_urn:
        meta["arg_urn"] = arg_urn
    return meta


Event = (
    RequestOpened
    | StreamOpened
    | StreamData
    | StreamItem
    | StreamClosed
    | LogReceived
    | ProgressReceived
    | BodyEnded
    | ErrorReport
)
