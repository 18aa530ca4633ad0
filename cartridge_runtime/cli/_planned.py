"""``cartridge run --to MEDIA INPUT... [--pick N] [--dry-run]``: plan, show the chosen
machine, then run it as ``cartridge run FILE`` runs a machine file.

The inputs are detected as ``cartridge plan`` detects them, the plans are ranked over the caps
of the ``--cartridge``\\ s, and plan ``N`` (1 by default) becomes the machine: its text goes to
a file the run reads (and the run record keeps), its one input node takes the file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import attrs

from ._run_setup import Usage
from ._sources import CartridgeSources, SourceError, planning_engine

__all__ = ("PlannedRun", "NoPlan", "plan_run")


class NoPlan(Exception):
    """No way from the inputs to the target: one line, exit 1."""


@attrs.frozen(kw_only=True)
class PlannedRun:
    """The machine a planned run runs.

    :ivar text: the machine's canonical text.
    :ivar input_node: the name of its one input node.
    :ivar description: the plan in words (``split → ForEach → route``).
    :ivar rank: which plan it is (1 is the best).
    :ivar count: how many plans were found.
    """

    text: str
    input_node: str
    description: str
    rank: int
    count: int

    def write(self, folder: Path) -> Path:
        """The machine text as a file in ``folder`` (what the run reads)."""
        path = folder / "planned.machine"
        path.write_text(self.text + "\n", encoding="utf-8")
        return path


async def _plans(
    inputs: list[str], target: str, cartridges: list[str], depth: int
) -> tuple[str, list[Any]]:
    from ..planner import planning_source

    query = await anyio.to_thread.run_sync(lambda: planning_source(inputs))
    sources = CartridgeSources.checked([Path(c) for c in cartridges], None, None)
    async with planning_engine(sources) as engine:
        plans = await engine.plan(
            query.media, target, is_sequence=query.is_sequence, max_depth=depth
        )
    return str(query.media), plans


def plan_run(
    inputs: list[str], target: str, cartridges: list[str], pick: int, depth: int = 10
) -> PlannedRun:
    """Plan the run (starting the cartridges only to read their manifests).

    :raises Usage: not one input, a missing input file, no cartridge, a ``--pick`` past the
        plans found, a target that is not a media URN.
    :raises NoPlan: no way from the input to ``target``.
    """
    from ..errors import DefinitionError
    from ..planner import InputError

    if len(inputs) != 1:
        raise Usage(f"--to runs one INPUT at a time (given {len(inputs)}); plan several with "
                    "`cartridge plan`")  # fmt: skip
    if pick < 1:
        raise Usage("--pick counts from 1")
    try:
        source, plans = anyio.run(_plans, inputs, target, cartridges, depth)
    except (SourceError, InputError, DefinitionError) as error:
        raise Usage(str(error)) from None
    if not plans:
        raise NoPlan(f"error: no way from {source} to {target} over these cartridges")
    if pick > len(plans):
        raise Usage(f"--pick {pick}: only {len(plans)} plan(s) found")
    plan = plans[pick - 1]
    (node,) = plan.machine.inputs
    return PlannedRun(
        text=plan.to_notation(),
        input_node=node.label or node.name,
        description=plan.description,
        rank=pick,
        count=len(plans),
    )


def show(planned: PlannedRun) -> None:
    """The chosen plan on stderr, before the run."""
    print(
        f"plan {planned.rank} of {planned.count}: {planned.description}",
        file=sys.stderr,
    )
    for line in planned.text.splitlines():
        print(f"  {line}", file=sys.stderr)


def scratch_folder() -> Path:
    """A folder for the planned machine's file (removed by the caller)."""
    return Path(tempfile.mkdtemp(prefix="cartridge-plan-"))
