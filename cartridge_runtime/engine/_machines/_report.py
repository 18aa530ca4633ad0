"""What a machine run counts as it goes: calls, items, bytes, time, progress and outputs.

:class:`Reports` is plain bookkeeping, fed by the runner; it turns into the
:class:`MachineResult` at the end. Overall progress weighs every step alike: a step outside a
map counts its call's own fraction (1 once it finished or was skipped); a step inside a map
counts its finished runs over the items its map has seen so far (so the fraction can step back
a little while a map is still reading its sequence, and reaches 1 when it is done).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ...machine import Machine, Node, Step
from .._events import Item, OutputResult
from .._inputs import Verified
from ._events import MachineEvent, MachineOutputData, MachineResult, StepReport

if TYPE_CHECKING:
    from ...machine import ScopePlan

__all__ = ("Reports",)


def _size(piece: Any) -> int:
    if type(piece) is Verified:
        return len(piece.data)
    if isinstance(piece, bytes | bytearray):
        return len(piece)
    if isinstance(piece, memoryview):
        return piece.nbytes
    if isinstance(piece, str):
        return len(piece.encode("utf-8"))
    if isinstance(piece, Item):
        return _size(piece.value)
    return 0


class _StepCount:
    def __init__(self, step: Step, name: str) -> None:
        self.step = step
        self.name = name
        self.calls = self.runs = self.skipped = self.absent = 0
        self.hits = self.misses = 0
        self.bytes_in = self.bytes_out = 0
        self.first: float | None = None
        self.last = 0.0
        self.fraction = 0.0  # outside a map: the call's own progress


class Reports:
    """The counters of one run."""

    def __init__(self, machine: Machine, keep_outputs: bool) -> None:
        self._machine = machine
        self._keep = keep_outputs
        self._began = time.monotonic()
        self._steps: dict[int, _StepCount] = {}
        for step, name in zip(machine.steps, machine.step_names, strict=True):
            self._steps[id(step)] = _StepCount(step, name)
        self._items: dict[tuple[int, int], int] = {}
        self._present: dict[str, Node] = {}
        self._absent: list[str] = []
        self._data: dict[str, list[Any]] = {}
        self._result: MachineResult | None = None

    def _count(self, step: Step) -> _StepCount:
        return self._steps[id(step)]

    # -- steps ----------------------------------------------------------------------------------

    def call_started(self, step: Step) -> None:
        count = self._count(step)
        count.calls += 1
        if count.first is None:
            count.first = time.monotonic()

    def call_finished(self, step: Step, cached: bool = False) -> None:
        count = self._count(step)
        count.runs += 1
        count.misses += cached
        count.last = time.monotonic()
        count.fraction = 1.0

    def cache_hit(self, step: Step) -> None:
        """A run answered from the step cache: no call was made."""
        count = self._count(step)
        now = time.monotonic()
        if count.first is None:
            count.first = now
        count.runs += 1
        count.hits += 1
        count.last = now
        count.fraction = 1.0

    def failed_call(self, step: Step, seconds: float) -> None:
        self._count(step).last = time.monotonic()

    def skipped(self, step: Step) -> None:
        count = self._count(step)
        count.skipped += 1
        count.fraction = 1.0

    def absent(self, step: Step) -> None:
        count = self._count(step)
        count.absent += 1
        count.fraction = 1.0

    def item_seen(self, scope: ScopePlan) -> None:
        key = (scope.strand, scope.index)
        self._items[key] = self._items.get(key, 0) + 1

    def count_in(self, step: Step, pieces: list[Any]) -> int:
        n = sum(_size(p) for p in pieces)
        self._count(step).bytes_in += n
        return n

    async def counting_in(
        self, step: Step, pieces: AsyncIterator[Any], tally: Any = None
    ) -> AsyncIterator[Any]:
        count = self._count(step)
        async for piece in pieces:
            n = _size(piece)
            count.bytes_in += n
            if tally is not None:
                tally.bytes_in += n
            yield piece

    def count_out(self, step: Step, piece: Any) -> int:
        n = _size(piece)
        self._count(step).bytes_out += n
        return n

    def bytes_so_far(self) -> dict[str, tuple[int, int]]:
        """By step name: the bytes its calls have taken in and given out so far."""
        return {c.name: (c.bytes_in, c.bytes_out) for c in self._steps.values()}

    def progress(self, step: Step, item: int | None, fraction: float | None) -> float:
        """Record a call's progress; the run's overall fraction."""
        if item is None and fraction is not None:
            self._count(step).fraction = min(max(fraction, 0.0), 1.0)
        return self.overall()

    def overall(self) -> float:
        if not self._steps:
            return 1.0
        total = 0.0
        for count in self._steps.values():
            scope = count.step.placement.scope
            if scope == 0:
                total += count.fraction
            else:
                seen = self._items.get((count.step.strand, scope), 0)
                done = count.runs + count.skipped + count.absent
                total += min(done / seen, 1.0) if seen else 0.0
        return total / len(self._steps)

    # -- outputs --------------------------------------------------------------------------------

    def output_present(self, label: str, node: Node) -> None:
        self._present[label] = node
        self._data.setdefault(label, [])

    def output_absent(self, label: str) -> None:
        self._absent.append(label)

    def on_event(self, event: MachineEvent) -> None:
        if self._keep and isinstance(event, MachineOutputData):
            piece = Item(value=event.value, meta=event.meta) if event.is_item else event.value
            self._data[event.output].append(piece)

    def finish(self) -> None:
        outputs: dict[str, OutputResult] = {}
        for label, node in self._present.items():
            pieces = self._data.get(label, [])
            items = tuple(p for p in pieces if isinstance(p, Item))
            data = b"".join(
                bytes(p) if isinstance(p, bytes | bytearray | memoryview) else p.encode("utf-8")
                for p in pieces
                if isinstance(p, bytes | bytearray | memoryview | str)
            )
            values = tuple(
                p for p in pieces if not isinstance(p, Item | bytes | bytearray | memoryview | str)
            )
            outputs[label] = OutputResult(
                output=label,
                media_urn=node.media.text,
                is_sequence=bool(items) or node.is_sequence or node.scope != 0,
                data=data,
                values=values,
                items=items,
            )
        steps = {
            count.name: StepReport(
                step=count.name,
                cap=count.step.cap.text,
                calls=count.calls,
                items=count.runs + count.absent if count.step.placement.scope else 0,
                skipped=count.skipped,
                absent=count.absent,
                bytes_in=count.bytes_in,
                bytes_out=count.bytes_out,
                seconds=(count.last - count.first) if count.first is not None else 0.0,
                cache_hits=count.hits,
                cache_misses=count.misses,
            )
            for count in self._steps.values()
        }
        self._result = MachineResult(
            outputs=outputs,
            absent=tuple(self._absent),
            steps=steps,
            seconds=time.monotonic() - self._began,
        )

    @property
    def result(self) -> MachineResult:
        assert self._result is not None, "the run has not finished"
        return self._result
