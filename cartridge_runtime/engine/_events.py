"""What a call's response yields, and what ``collect()`` returns.

Events arrive in wire order. ``output`` names the output stream an event belongs to:
``None`` for the main output, else the output's media URN as the cartridge wrote it in
STREAM_START key 21.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._item import Item as Item  # re-exported: the engine's item type
from .._redact import describe, describe_items, describe_meta, describe_values


@attrs.frozen(kw_only=True)
class OutputStarted:
    """A response stream opened (STREAM_START)."""

    output: str | None
    stream_id: str
    media_urn: str
    is_sequence: bool
    unbounded: bool = False
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)


@attrs.frozen(kw_only=True)
class OutputData:
    """One scalar chunk of an output, decoded: usually ``bytes`` or ``str``, any CBOR value.

    ``wire`` is the verified ``(checksum, payload length)`` of its CHUNK, for forwarding the
    value to another call without hashing it again (see :class:`Verified`).
    """

    output: str | None
    stream_id: str
    value: Any = attrs.field(repr=describe)
    wire: tuple[int, int] | None = attrs.field(default=None, repr=False, eq=False)


@attrs.frozen(kw_only=True)
class OutputItem:
    """One whole sequence item of an output, with the meta of its first fragment."""

    output: str | None
    stream_id: str
    value: Any = attrs.field(repr=describe)
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)


@attrs.frozen(kw_only=True)
class OutputEnded:
    """A response stream closed (STREAM_END)."""

    output: str | None
    stream_id: str
    chunk_count: int | None


@attrs.frozen(kw_only=True)
class Progress:
    """A progress LOG.

    :ivar indeterminate: the cartridge does not know how far it is (``progress(None, ...)``):
        show a spinner, not a percentage; ``progress`` repeats the last fraction it reported.
    """

    progress: float
    message: str = ""
    indeterminate: bool = False


@attrs.frozen(kw_only=True)
class Log:
    """A non-progress LOG line."""

    level: str
    message: str
    attribution_class: str | None = None
    arg_urn: str | None = None


@attrs.frozen(kw_only=True)
class Metric:
    """A metric the handler reported (``req.metric``, a LOG of level ``metric``, REQ-39)."""

    name: str
    value: float
    labels: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TraceEvent:
    """A trace event the handler recorded (``req.trace``, a LOG of level ``trace``)."""

    name: str
    attributes: Mapping[str, Any] = attrs.field(factory=dict, repr=describe_meta)


CallEvent = (
    OutputStarted | OutputData | OutputItem | OutputEnded | Progress | Log | Metric | TraceEvent
)


@attrs.frozen(kw_only=True)
class OutputResult:
    """Everything one output stream carried.

    :ivar data: scalar values joined: bytes as is, text as UTF-8, anything else as CBOR.
    :ivar values: the scalar values as decoded, when any was neither bytes nor text.
    :ivar items: sequence items in order, each an :class:`Item` (value and meta).
    """

    output: str | None
    media_urn: str
    is_sequence: bool
    data: bytes = attrs.field(default=b"", repr=describe)
    values: tuple[Any, ...] = attrs.field(default=(), repr=describe_values)
    items: tuple[Item, ...] = attrs.field(default=(), repr=describe_items)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@attrs.frozen(kw_only=True)
class Result:
    """A finished call: every output, the logs and progress seen, and END's meta.

    ``outputs`` is keyed like events: ``None`` for the main output.
    """

    outputs: Mapping[str | None, OutputResult]
    logs: tuple[Log, ...] = ()
    progress: tuple[Progress, ...] = ()
    end_meta: Mapping[str, Any] | None = attrs.field(default=None, repr=describe_meta)
    #: LOG and progress events left out, the oldest first (more than
    #: ``EngineConfig.max_pending_logs`` came).
    dropped_logs: int = 0
    #: The metrics and trace events the handler reported, in order (REQ-39).
    metrics: tuple[Metric, ...] = ()
    traces: tuple[TraceEvent, ...] = ()
    #: Attempts the call took (more than 1 when ``retry=`` tried it again).
    attempts: int = 1

    @property
    def main(self) -> OutputResult | None:
        return self.outputs.get(None)

    @property
    def data(self) -> bytes:
        """The main output's joined bytes (``b""`` when there is none)."""
        main = self.outputs.get(None)
        return main.data if main is not None else b""

    @property
    def items(self) -> list[Any]:
        """The main output's sequence item values."""
        main = self.outputs.get(None)
        return [i.value for i in main.items] if main is not None else []

    @property
    def message(self) -> str | None:
        return (self.end_meta or {}).get("message")

    def output(self, name: str) -> OutputResult | None:
        """A named output, by exact name or media-URN equivalence."""
        if name in self.outputs:
            return self.outputs[name]
        from ..urn import MediaUrn, UrnError

        try:
            wanted = MediaUrn.parse(name)
        except UrnError:
            return None
        for key, out in self.outputs.items():
            if key is None:
                continue
            try:
                if MediaUrn.parse(key).is_equivalent(wanted):
                    return out
            except UrnError:
                continue
        return None
