"""Reading manifests by starting cartridges, through the engine's public API (DSC-11).

Each candidate goes through the engine's whole start-up (spawn, HELLO, identity check,
manifest validation, POLICY), exactly as it will when hosted, and is stopped as soon as its
manifest is in hand. A candidate that fails any step is answered with the engine's one-line
reason and the last line of its stderr.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import anyio

from ..engine import CallError, Engine, EngineConfig, EngineError
from ..manifest import Manifest
from ._scan import Candidate

__all__ = ("MAX_PARALLEL_STARTS", "probe")

#: Cartridges started at once to read their manifests: enough to hide start-up latency,
#: few enough not to swamp a small machine.
MAX_PARALLEL_STARTS: Final = 8


def _reason(error: EngineError) -> str:
    line = error.one_line() if isinstance(error, CallError) else str(error)
    tail = getattr(error, "stderr_tail", "") or ""
    last = next((t.strip() for t in reversed(tail.splitlines()) if t.strip()), "")
    return f"{line} (stderr: {last})" if last and last not in line else line


async def probe(
    candidates: Sequence[Candidate], config: EngineConfig | None
) -> tuple[list[Manifest | str], int]:
    """Start each candidate once: its manifest, or the reason it did not start, in the
    candidates' order; and how many processes were started."""
    results: list[Manifest | str] = ["not started"] * len(candidates)
    limiter = anyio.CapacityLimiter(MAX_PARALLEL_STARTS)
    started = 0

    async def one(engine: Engine, index: int, candidate: Candidate) -> None:
        nonlocal started
        async with limiter:
            try:
                name = engine.add_cartridge(list(candidate.command), name=f"discovery-{index}")
            except EngineError as error:
                results[index] = _reason(error)
                return
            started += 1
            try:
                await engine.start(name)
                manifest = engine.manifest(name)
                results[index] = manifest if manifest is not None else "it gave no manifest"
            except EngineError as error:
                results[index] = _reason(error)
            finally:
                await engine.stop(name)

    async with Engine(config) as engine, anyio.create_task_group() as tg:
        for index, candidate in enumerate(candidates):
            tg.start_soon(one, engine, index, candidate)
    return results, started
