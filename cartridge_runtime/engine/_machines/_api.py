"""Running a machine from the caller's side: the streaming context and the run to the end.

:class:`MachineRun` is what ``async with engine.stream_machine(...)`` gives: the run starts on
entering the block and is cancelled on leaving it early. :func:`run_to_end` is
:meth:`Engine.run_machine`'s run, with no event stream in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from ...machine import Machine
from ._events import MachineEvent, MachineResult
from ._runner import Caller, MachineRunner

__all__ = ("MachineRun", "open_run", "run_to_end")


class MachineRun:
    """``async with engine.stream_machine(machine, inputs) as run: async for event in run``.

    The run starts on entering the block and its events come in the order things happen;
    iteration ends when the run is done, and raises :class:`MachineRunError` when a step
    failed. Leaving the block early cancels the run (and every call in flight). After the
    loop, :attr:`result` has the step reports (and the outputs when ``keep_outputs``).
    """

    def __init__(
        self, runner: MachineRunner, receive: MemoryObjectReceiveStream[MachineEvent]
    ) -> None:
        self._runner = runner
        self._receive = receive
        self._tg: TaskGroup | None = None
        self._error: BaseException | None = None

    async def __aenter__(self) -> MachineRun:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive)
        return self

    async def _drive(self) -> None:
        try:
            await self._runner.run()
        except BaseException:
            # The first step that failed; what it cancelled (task groups nest) is not news.
            if self._runner.failure is None:
                raise
            self._error = self._runner.failure
        finally:
            if self._runner.events is not None:
                self._runner.events.close()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        self._receive.close()
        # The block's own exception (a step failure raised by the loop, a cancel) goes on
        # unchanged: the run's tasks were only cancelled, which is not news to the caller.
        await self._tg.__aexit__(None, None, None)
        return None

    def __aiter__(self) -> MachineRun:
        return self

    async def __anext__(self) -> MachineEvent:
        try:
            event: MachineEvent = await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self._error is not None:
                raise self._error from None
            raise StopAsyncIteration from None
        return event

    @property
    def result(self) -> Any:
        """The :class:`MachineResult`, once the run ended."""
        return self._runner.reports.result


def open_run(
    engine: Caller,
    machine: Machine,
    inputs: Mapping[str, Any],
    *,
    window: int,
    keep_outputs: bool,
    observers: Sequence[Any] = (),
    buffer: int = 64,
) -> MachineRun:
    """A run of ``machine``; the inputs are checked here, before anything starts.

    :raises MachineInputError: an input missing, unknown, or not of its node's type.
    """
    send, receive = anyio.create_memory_object_stream[MachineEvent](buffer)
    try:
        runner = MachineRunner(engine, machine, inputs, send, window, keep_outputs, observers)
    except BaseException:
        send.close()
        receive.close()
        raise
    return MachineRun(runner, receive)


async def run_to_end(
    engine: Caller,
    machine: Machine,
    inputs: Mapping[str, Any],
    *,
    window: int,
    observers: Sequence[Any] = (),
) -> MachineResult:
    """Run ``machine`` and gather its outputs, with no event stream in between.

    :raises MachineInputError: the inputs do not fit (nothing is started).
    :raises MachineRunError: the first step that failed.
    """
    runner = MachineRunner(engine, machine, inputs, None, window, True, observers)
    try:
        await runner.run()
    except BaseException:
        if runner.failure is None:
            raise
        raise runner.failure from None
    return runner.reports.result
