"""Reading manifests by starting cartridges, through the engine's public API (DSC-11).

Each candidate goes through the engine's whole start-up (spawn, HELLO, identity check,
manifest validation, POLICY), exactly as it will when hosted, and is stopped as soon as its
manifest is in hand. A candidate that fails any step is answered with the engine's one-line
reason and the last line of its stderr, and whether the failure may pass (it ran out of time
rather than failing on its own).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

import anyio
import attrs

from ..engine import CallError, Engine, EngineConfig, EngineError
from ..manifest import Manifest
from ._scan import Candidate

__all__ = ("MAX_PARALLEL_STARTS", "DISCOVERY_STEP_TIMEOUT", "StartFailure", "probe")

#: Cartridges started at once to read their manifests, at most (and never more than the CPUs,
#: at least 2): enough to hide start-up latency, few enough not to starve each other of CPU
#: into their start-up time limit.
MAX_PARALLEL_STARTS: Final = 8
#: Seconds each start-up step may take when no engine configuration is given: more than a
#: call's default, since discovery may start many cartridges at once on a busy machine.
DISCOVERY_STEP_TIMEOUT: Final = 30.0


@attrs.frozen
class StartFailure:
    """Why a candidate did not start; ``transient`` when it ran out of time (the next discovery
    tries again) rather than failing on its own (remembered until it changes)."""

    reason: str
    transient: bool = False


def _reason(error: EngineError) -> str:
    line = error.one_line() if isinstance(error, CallError) else str(error)
    tail = getattr(error, "stderr_tail", "") or ""
    last = next((t.strip() for t in reversed(tail.splitlines()) if t.strip()), "")
    return f"{line} (stderr: {last})" if last and last not in line else line


async def probe(
    candidates: Sequence[Candidate], config: EngineConfig | None
) -> tuple[list[Manifest | StartFailure], int]:
    """Start each candidate once: its manifest, or why it did not start, in the candidates'
    order; and how many processes were started."""
    if config is None:
        config = EngineConfig(step_timeout=DISCOVERY_STEP_TIMEOUT, heartbeat_interval=None)
    results: list[Manifest | StartFailure] = [StartFailure("not started")] * len(candidates)
    limiter = anyio.CapacityLimiter(max(2, min(MAX_PARALLEL_STARTS, os.cpu_count() or 1)))
    started = 0

    async def one(engine: Engine, index: int, candidate: Candidate) -> None:
        nonlocal started
        async with limiter:
            try:
                name = engine.add_cartridge(list(candidate.command), name=f"discovery-{index}")
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

    async with Engine(config) as engine, anyio.create_task_group() as tg:
        for index, candidate in enumerate(candidates):
            tg.start_soon(one, engine, index, candidate)
    return results, started
