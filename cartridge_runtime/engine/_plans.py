"""Planning on an engine: from what the caller has to what they want, over the caps of the
engine's cartridges.

:meth:`Engine.plan <cartridge_runtime.engine.Engine.plan>` reads the caps as machine
resolution does (a manifest known ahead, as a discovery's cache gives it, is read without
starting the cartridge; another cartridge is started only to read its manifest), tells the
source's media URN (given, or detected from files), and asks the sans-IO planner for the
ranked plans (PLAN-8 .. PLAN-14). Each plan's machine resolves against the same caps, so
``engine.run_machine(plan.machine, ...)`` runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread

from ..planner import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_DEPTH,
    Plan,
    PlanningSource,
    complete_first,
    find_paths,
)
from ..urn import MediaUrn
from ._machines._text import ManifestSource, engine_caps

__all__ = ("plan_on",)


async def plan_on(
    engine: ManifestSource,
    names: Sequence[str],
    query: PlanningSource,
    target: str | MediaUrn,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limit: int = DEFAULT_LIMIT,
) -> list[Plan]:
    """The ranked plans from ``query`` to ``target`` over the caps of ``names`` (best first;
    none is an empty list). Plans that need a side argument the machine leaves unbound come
    after the complete ones (PLAN-25), so ``plans[0].machine`` runs as it is when any plan
    can.

    :raises SpawnFailed: a cartridge whose manifest is not known failed to start.
    :raises PlannerError: a target that is not a media URN, a bad depth or limit.
    """
    caps = await engine_caps(engine, names)
    plans = await anyio.to_thread.run_sync(
        lambda: find_paths(
            caps,
            query.media,
            target,
            is_sequence=query.is_sequence,
            max_depth=max_depth,
            limit=limit,
        )
    )
    return complete_first(plans)
