"""``cartridge run --to MEDIA INPUT... [--pick N] [--arg NAME=VALUE] [--dry-run]``: plan,
show the chosen machine, then run it once per input file as ``cartridge run FILE`` runs a
machine file.

The inputs (files, folders, globs, ``-`` for standard input; ``--media`` declares their type)
are detected as ``cartridge plan`` detects them, and each file is planned from as one value of
their common type: the run is the same machine over each file. The plans are ranked over the
caps of the ``--cartridge``\\ s and ``--from-dir`` folders, those that need a side argument
not given with ``--arg`` after the complete ones (PLAN-25), and plan ``N`` (1 by default)
becomes the machine, its side arguments bound from ``--arg``. Its text goes to a file the run
reads (the run record keeps the text and names the input and the target); its one input node
takes the file. With ``--output-dir`` each output is named after its input and the target
(``report.kept-word.txt``).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs

from ._plan_query import (
    STDIN,
    mixed_note,
    no_way_lines,
    output_name,
    parse_arguments,
    planning_query,
    read_stdin,
)
from ._run_setup import Usage
from ._sources import CartridgeSources, SourceError, planning_caps

if TYPE_CHECKING:
    from ..machine import Machine
    from ..planner import Plan, PlanningSource

__all__ = (
    "PlannedRun",
    "PlanRequest",
    "NoPlan",
    "plan_run",
    "show",
    "scratch_folder",
    "record_extra",
    "run_each",
)


#: Exit statuses from here up mean a signal stopped the run (128 + N).
INTERRUPTED: Final = 128


class NoPlan(Exception):
    """No way from the inputs to the target: the reason on stderr, exit 1."""


@attrs.frozen(kw_only=True)
class PlanRequest:
    """What ``run --to`` was asked.

    :ivar inputs: the INPUT arguments (files, folders, globs, or ``-``).
    :ivar target: the media URN wanted.
    :ivar cartridges: the ``--cartridge`` paths.
    :ivar from_dirs: the ``--from-dir`` folders.
    :ivar media: the declared media URN of the inputs (``--media``).
    :ivar arguments: the side arguments given (``--arg NAME=VALUE``).
    :ivar pick: which plan to run (1 is the best).
    :ivar depth: the longest plan searched, in steps.
    :ivar refresh: start every discovered cartridge again.
    """

    inputs: tuple[str, ...]
    target: str
    cartridges: tuple[str, ...] = ()
    from_dirs: tuple[Path, ...] = ()
    media: str | None = None
    arguments: tuple[str, ...] = ()
    pick: int = 1
    depth: int = 10
    refresh: bool = False


@attrs.frozen(kw_only=True)
class PlannedRun:
    """The machine a planned run runs, and the files it runs over.

    :ivar text: the machine's canonical text (side arguments bound).
    :ivar input_node: the name of its one input node.
    :ivar output_node: the name of its output node (the last step's).
    :ivar description: the plan in words (``split → ForEach → route``).
    :ivar rank: which plan it is (1 is the best).
    :ivar count: how many plans were found.
    :ivar files: the input files, one run each.
    :ivar target: the media URN asked for.
    :ivar source: the media URN planned from.
    """

    text: str
    input_node: str
    output_node: str
    description: str
    rank: int
    count: int
    files: tuple[Path, ...]
    target: str
    source: str

    def write(self, folder: Path) -> Path:
        """The machine text as a file in ``folder`` (what the run reads)."""
        path = folder / "planned.machine"
        path.write_text(self.text + "\n", encoding="utf-8")
        return path

    def output_file(self, folder: Path, input_file: Path) -> Path:
        """Where the output of the run over ``input_file`` goes in ``folder``."""
        return folder / output_name(input_file, self.target)

    def label(self, input_file: Path) -> str:
        """What the run record names as the run's source: the input and the target."""
        return f"{input_file} --to {self.target}"


def _choose(plans: list[Plan], given: dict[str, str], pick: int) -> tuple[Plan, Machine]:
    """Plan ``pick`` of ``plans`` ordered for a person (complete ones first), and its machine
    with the arguments bound.

    :raises Usage: a ``--pick`` past the plans, a plan that still needs an argument.
    :raises KnitError: an argument no step of the plan takes.
    """
    from ..planner import complete_first

    ordered = complete_first(plans, given)
    if pick > len(ordered):
        raise Usage(f"--pick {pick}: only {len(ordered)} plan(s) found")
    plan = ordered[pick - 1]
    machine = plan.machine_with(given)
    missing = plan.needs_beyond(given)
    if missing:
        wanted = " ".join(f"--arg {name}=VALUE" for name in missing)
        raise Usage(f"plan {pick} ({plan.description}) needs {', '.join(missing)}: give {wanted}")
    return plan, machine


def _files(query: PlanningSource, inputs: Sequence[str]) -> tuple[Path, ...]:
    if query.inputs is None:
        raise Usage(f"--to runs files: {inputs[0]} is a media URN (give a file, or plan it)")
    return query.inputs.paths


def plan_run(request: PlanRequest, scratch: Path) -> PlannedRun:
    """Plan the run (starting the cartridges only to read their manifests); standard input,
    when ``-`` is the input, is copied into ``scratch``.

    :raises Usage: no input, a missing input file, no cartridge, a ``--pick`` past the plans
        found, a target that is not a media URN, a plan that needs an argument not given.
    :raises NoPlan: no way from the input to ``target``.
    """
    from ..errors import CartridgeRuntimeError, DefinitionError
    from ..planner import InputError

    if request.pick < 1:
        raise Usage("--pick counts from 1")
    inputs = list(request.inputs)
    try:
        given = parse_arguments(request.arguments)
        sources = CartridgeSources.checked(
            [Path(c) for c in request.cartridges],
            list(request.from_dirs),
            None,
            refresh=request.refresh,
        )
        if STDIN in inputs:
            if inputs != [STDIN]:
                raise Usage("- (standard input) is the only INPUT when it is given")
            inputs = [str(read_stdin(scratch))]
        query = planning_query(inputs, request.media, one_value=True)
        files = _files(query, inputs)
        note = mixed_note(query)
        if note is not None:
            raise Usage(note.removeprefix("note: "))
        world = anyio.run(planning_caps, sources)
        from ..planner import find_paths

        plans = find_paths(world.caps, query.media, request.target, max_depth=request.depth)
        if not plans:
            lines = no_way_lines(query, request.target, world.caps, request.depth)
            raise NoPlan("\n".join(lines))
        plan, machine = _choose(plans, given, request.pick)
    except (SourceError, InputError, DefinitionError, ValueError) as error:
        raise Usage(str(error)) from None
    except CartridgeRuntimeError as error:
        raise Usage(str(error)) from None
    (node,) = machine.inputs
    (out,) = machine.outputs
    return PlannedRun(
        text=machine.to_notation(),
        input_node=node.label or node.name,
        output_node=out.label or out.name,
        description=plan.description,
        rank=request.pick,
        count=len(plans),
        files=files,
        target=request.target,
        source=str(query.media),
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


def record_extra(planned: PlannedRun, input_file: Path) -> dict[str, Any]:
    """What a planned run's record keeps besides the machine: the input, the target, the
    plan."""
    return {
        "planned": {
            "input": str(input_file),
            "to": planned.target,
            "source_media": planned.source,
            "plan": planned.description,
            "rank": planned.rank,
        }
    }


def run_each(opts: Any, planned: PlannedRun, run_one: Callable[[Any], int]) -> int:
    """The planned machine run once per input file by ``run_one`` (``cartridge run``'s runner,
    given its options): each run's input node takes the file, its output (with
    ``--output-dir``) is named after the file and the target, and its record names the file
    and the target. The worst exit status is returned; an interrupt stops at once."""
    worst = 0
    several = len(planned.files) > 1
    for number, path in enumerate(planned.files, 1):
        targets = dict(opts.targets)
        if opts.output_dir is not None and planned.output_node not in targets:
            targets[planned.output_node] = planned.output_file(opts.output_dir, path)
        if several:
            print(f"[{number}/{len(planned.files)}] {path}", file=sys.stderr)
        code = run_one(
            attrs.evolve(
                opts,
                inputs={**opts.inputs, planned.input_node: path},
                targets=targets,
                source=planned.label(path),
                extra=record_extra(planned, path),
            )
        )
        if code >= INTERRUPTED:
            return code  # interrupted: the other files are not started
        worst = max(worst, code)
    return worst
