"""Discovery on the engine's side: reading the manifests a discovery's cache does not hold
by starting the cartridges (DSC-11), and hosting what a discovery found.

:mod:`cartridge_runtime.discovery` scans a folder and keeps the manifest cache without any
IO of processes; this module gives it the :class:`~cartridge_runtime.discovery.ManifestStarter`
it needs, and is what :func:`~cartridge_runtime.engine.discover` and
:meth:`Engine.discover <cartridge_runtime.engine.Engine.discover>` run.

Each candidate goes through the engine's whole start-up (spawn, HELLO, identity check,
manifest validation, POLICY), exactly as it will when hosted, and is stopped as soon as its
manifest is in hand. A candidate that fails any step is answered with the engine's one-line
reason and the last line of its stderr, and whether the failure may pass (it ran out of time
rather than failing on its own).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol, Self

import anyio

from ..discovery import StartFailure
from ..manifest import Manifest
from ._config import EngineConfig
from ._errors import CallError, EngineError


class ProbingEngine(Protocol):
    """What :func:`probe` needs of an engine: add, start and stop a cartridge, read its
    manifest, its configuration; entered as an async context."""

    config: EngineConfig

    def add_cartridge(self, target: Any, *, name: str | None = None) -> str: ...
    async def start(self, name: str) -> None: ...
    async def stop(self, name: str) -> None: ...
    def manifest(self, name: str) -> Any: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(self, *exc: object) -> bool | None: ...


__all__ = ("MAX_PARALLEL_STARTS", "DISCOVERY_STEP_TIMEOUT", "ProbingEngine", "probe")

#: Cartridges started at once to read their manifests, at most (and never more than the CPUs,
#: at least 2): enough to hide start-up latency, few enough not to starve each other of CPU
#: into their start-up time limit.
MAX_PARALLEL_STARTS: Final = 8
#: Seconds each start-up step may take when no engine configuration is given: more than a
#: call's default, since discovery may start many cartridges at once on a busy machine.
DISCOVERY_STEP_TIMEOUT: Final = 30.0


def _reason(error: EngineError) -> str:
    line = error.one_line() if isinstance(error, CallError) else str(error)
    tail = getattr(error, "stderr_tail", "") or ""
    last = next((t.strip() for t in reversed(tail.splitlines()) if t.strip()), "")
    return f"{line} (stderr: {last})" if last and last not in line else line


async def probe(
    commands: Sequence[tuple[str, ...]],
    *,
    engine_type: Callable[[EngineConfig], ProbingEngine],
    config: EngineConfig | None = None,
) -> tuple[list[Manifest | StartFailure], int]:
    """Start each candidate once: its manifest, or why it did not start, in the candidates'
    order; and how many processes were started."""
    if config is None:
        config = EngineConfig(step_timeout=DISCOVERY_STEP_TIMEOUT, heartbeat_interval=None)
    results: list[Manifest | StartFailure] = [StartFailure("not started")] * len(commands)
    limiter = anyio.CapacityLimiter(max(2, min(MAX_PARALLEL_STARTS, os.cpu_count() or 1)))
    started = 0

    async def one(engine: ProbingEngine, index: int, command: tuple[str, ...]) -> None:
        nonlocal started
        async with limiter:
            try:
                name = engine.add_cartridge(list(command), name=f"discovery-{index}")
            except EngineError as error:
                results[index] = StartFailure(_reason(error))
                return
            started += 1
            began = anyio.current_time()
            try:
                await engine.start(name)
                manifest = engine.manifest(name)
                if manifest is None:
                    results[index] = StartFailure("it gave no manifest")
                else:
                    results[index] = manifest
            except EngineError as error:
                # A step that ran out of time may pass on a quieter machine: not remembered.
                slow = anyio.current_time() - began >= engine.config.step_timeout
                results[index] = StartFailure(_reason(error), transient=slow)
            finally:
                await engine.stop(name)

    async with engine_type(config) as engine, anyio.create_task_group() as tg:
        for index, command in enumerate(commands):
            tg.start_soon(one, engine, index, command)
    return results, started
