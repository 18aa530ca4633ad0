"""What a machine run reports: its events, its result, and how it fails.

A run is a sequence of events (:data:`MachineEvent`) in the order things happen: a step's
call starting and finishing (once per item inside a map), a map's items starting and
finishing, progress mapped into the run's overall fraction, the cartridges' logs, and the
machine's output data as it is produced. :class:`MachineResult` is what
:meth:`Engine.run_machine` gathers from them. Step and output names are the ones the text
wrote (its aliases and node names), never the canonical ``edge_N`` / ``nN``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ...protocol import AttributionClass, ErrorCode
from .._errors import CallError, EngineError
from .._events import OutputResult

__all__ = (
    "StepStarted",
    "StepFinished",
    "ItemStarted",
    "ItemFinished",
    "MachineProgress",
    "MachineLog",
    "MachineOutputData",
    "MachineEvent",
    "StepReport",
    "MachineResult",
    "MachineRunError",
    "MachineInputError",
)


@attrs.frozen(kw_only=True)
class StepStarted:
    """A step's call started (``item``: its index in the map, or None outside one)."""

    step: str
    cap: str
    item: int | None


@attrs.frozen(kw_only=True)
class StepFinished:
    """A step's run ended: ``outcome`` is ``"ok"``, ``"skipped"`` (an input was absent) or
    ``"absent"`` (it failed under ``on_error=absent``)."""

    step: str
    item: int | None
    outcome: str
    seconds: float


@attrs.frozen(kw_only=True)
class ItemStarted:
    """An item of a map began; ``map`` names the map by the alias of the step that opens it."""

    map: str
    item: int


@attrs.frozen(kw_only=True)
class ItemFinished:
    map: str
    item: int


@attrs.frozen(kw_only=True)
class MachineProgress:
    """Progress of one step's call, and of the whole run (steps weighted alike, a map's items
    counted)."""

    step: str
    item: int | None
    fraction: float | None  #: the step's own fraction; None: indeterminate
    overall: float
    message: str = ""


@attrs.frozen(kw_only=True)
class MachineLog:
    step: str
    item: int | None
    level: str
    message: str


@attrs.frozen(kw_only=True)
class MachineOutputData:
    """A piece of one machine output, as it is produced: a scalar piece, or one whole item
    (``is_item``) of a sequence output."""

    output: str
    value: Any = attrs.field(repr=False)
    is_item: bool
    meta: Mapping[str, Any] | None = attrs.field(default=None, repr=False)


MachineEvent = (
    StepStarted
    | StepFinished
    | ItemStarted
    | ItemFinished
    | MachineProgress
    | MachineLog
    | MachineOutputData
)


@attrs.frozen(kw_only=True)
class StepReport:
    """What one step did over the run."""

    step: str
    cap: str
    calls: int  #: calls made (retries included)
    items: int  #: runs in a map (0 for a step outside one)
    skipped: int  #: runs skipped because an input was absent
    absent: int  #: runs that failed under on_error=absent
    bytes_in: int
    bytes_out: int
    seconds: float  #: wall time from its first call's start to its last call's end


@attrs.frozen(kw_only=True)
class MachineResult:
    """A finished run: each output present, by the node name the text wrote; ``absent`` lists
    the outputs that are absent (an optional output that did not fire upstream)."""

    outputs: Mapping[str, OutputResult]
    absent: tuple[str, ...]
    steps: Mapping[str, StepReport]
    seconds: float

    def __getitem__(self, name: str) -> OutputResult:
        return self.outputs[name]


class MachineRunError(CallError):
    """A step of a machine failed and the run stopped.

    :ivar step: the step's alias as the text wrote it.
    :ivar cap: the step's cap URN.
    :ivar item: the item index in the map the step ran in, or None outside a map.
    :ivar cause: the :class:`CallError` the step's call failed with (its ``code``,
        ``attribution_class`` and ``arg_urn`` are this error's too).
    """

    def __init__(self, step: str, cap: str, item: int | None, cause: CallError) -> None:
        where = f"step '{step}'" + (f", item {item}" if item is not None else "")
        super().__init__(
            cause.code, cause.attribution_class, f"{where} ({cap}): {cause.message}", cause.arg_urn
        )
        self.step = step
        self.cap = cap
        self.item = item
        self.cause = cause

    def __reduce__(self) -> tuple[Any, ...]:
        return (MachineRunError, (self.step, self.cap, self.item, self.cause))


class MachineInputError(EngineError):
    """The inputs given to a run do not fit the machine (nothing was started).

    :ivar node: the input node's name as the text wrote it.
    """

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(
            f"machine input '{node}': {reason}",
            code=ErrorCode.INVALID_INPUT,
            attribution_class=AttributionClass.INPUT,
        )
        self.node = node
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (MachineInputError, (self.node, self.reason))
