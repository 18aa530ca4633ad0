"""Events a :class:`BodyReceiver` reports for the frames of one request or response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._redact import describe, describe_meta
from ._constants import AttributionClass
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


@attrs.frozen(slots=True, kw_only=True)
class ErrorReport:
    """An ERR: why a request failed (ERR-1, ERR-2).

    The one value for an ERR everywhere in the package: the event a receiver yields for an ERR
    frame, what a harness call and a conformance check report, and what every error of the
    package's tree describes itself as (``error.report``). ``attribution_class`` is the text
    as it travelled, normally an :class:`AttributionClass` member; :attr:`attribution` reads it
    as one, treating an unknown word as ``internal``.
    """

    code: str
    attribution_class: str
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

    @property
    def attribution(self) -> AttributionClass:
        """The attribution class as the enum (an unknown word counts as ``internal``)."""
        try:
            return AttributionClass(self.attribution_class)
        except ValueError:
            return AttributionClass.INTERNAL

    @property
    def retryable(self) -> bool:
        """Whether a retry can help, by attribution class (ERR-2)."""
        return self.attribution.retryable

    def to_meta(self) -> dict[str, Any]:
        """The ERR frame's meta map for this report (``message`` falls back to the code)."""
        meta: dict[str, Any] = {
            "code": str(self.code),
            "attribution_class": str(self.attribution_class),
            "message": self.message or str(self.code),
        }
        if self.arg_urn:
            meta["arg_urn"] = self.arg_urn
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
