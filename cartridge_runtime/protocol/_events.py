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
from typing import Any

import attrs

from .._redact import describe, describe_meta
from .._report import ErrorReport as ErrorReport
from .._report import as_attribution_class as as_attribution_class
from .._report import as_error_code as as_error_code
from .._report import err_meta as err_meta
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
