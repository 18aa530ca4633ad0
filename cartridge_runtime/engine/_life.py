"""Whether an engine runs: the task group its work goes into while it does, and whether it was
closed. One small object the engine's parts share instead of reaching into the engine."""

from __future__ import annotations

import anyio.abc

from ._errors import EngineClosed

__all__ = ("EngineLife",)


class EngineLife:
    """The engine sets :attr:`tg` when it enters and clears it when it leaves, and sets
    :attr:`closed` on :meth:`~cartridge_runtime.engine.Engine.aclose`; its parts read both."""

    __slots__ = ("closed", "tg")

    def __init__(self) -> None:
        self.tg: anyio.abc.TaskGroup | None = None
        self.closed = False

    @property
    def running(self) -> bool:
        return self.tg is not None and not self.closed

    def check_running(self) -> anyio.abc.TaskGroup:
        """The task group, when the engine runs.

        :raises EngineClosed: it does not (outside ``async with``, or closed).
        """
        if self.tg is None or self.closed:
            raise EngineClosed()
        return self.tg
