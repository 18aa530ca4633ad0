"""``cartridge plan INPUT... [--to MEDIA] [--cartridge PATH ... | --from-dir ROOT ...]``.

Plans, without running anything: the INPUTs (files, folders, globs, ``-`` for standard input,
or one ``media:`` URN; ``--media`` declares their type) are detected (their extension,
confirmed or corrected by a bounded look at the content), then the planner lists the ranked
ways to reach MEDIA over the caps of the cartridges given. Each candidate is shown with its
steps by alias, the cartridge serving each step, which steps run per item, the side arguments
it needs (``needs path``: such plans come after the complete ones) and its machine text (what
``cartridge run`` and ``Engine.run_machine`` take). Without ``--to`` it lists what can be made
from the INPUT. Cartridges found with ``--from-dir`` plan from the manifest cache: a warm
cache starts none; those discovery refuses are named with the reason.

Exit status: 0 some plan found (or, without ``--to``, some target); 1 no way from the inputs
to MEDIA (the reason, the nearest targets, on stderr); 2 a usage error (nothing is started).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer

from ._app import app
from ._plan_query import STDIN, mixed_note, no_way_lines, planning_query, read_stdin
from ._sources import CartridgeSources, PlanningCaps, SourceError, planning_caps

if TYPE_CHECKING:
    from ..planner import Plan, PlanningSource, ReachableTarget

__all__ = ("plan_command", "serving_cartridges", "plan_rows")

_NO_PATH = 1
_USAGE = 2


def serving_cartridges(world: PlanningCaps, plan: Plan) -> list[str | None]:
    """Per cap step of ``plan``, the name of the first cartridge added whose manifest declares
    that cap (routing picks the first added), or ``None``."""
    return [world.serving.get(str(step.cap)) for step in plan.cap_steps]


def _label(step: Any) -> str:
    definition = step.definition
    if definition is not None and definition.aliases:
        return str(definition.aliases[0])
    return str(step.title)


def plan_rows(world: PlanningCaps, plans: list[Plan]) -> list[dict[str, Any]]:
    """The plans as plain data: rank, steps (alias, cap, cartridge, types, per item), the side
    arguments needed, machine."""
    rows = []
    for rank, plan in enumerate(plans, 1):
        serving = iter(serving_cartridges(world, plan))
        steps = []
        for step in plan.steps:
            if not step.is_cap:
                steps.append({"for_each": True, "media": str(step.input_media)})
                continue
            steps.append(
                {
                    "alias": _label(step),
                    "cap": str(step.cap),
                    "title": step.title,
                    "cartridge": next(serving),
                    "in": str(step.input_media),
                    "out": str(step.output_media),
                    "per_item": step.per_item,
                }
            )
        rows.append(
            {
                "rank": rank,
                "description": plan.description,
                "steps": steps,
                "needs": list(plan.needs),
                "machine": plan.to_notation() if plan.knittable else None,
            }
        )
    return rows


def _steps_text(row: dict[str, Any]) -> str:
    parts = []
    for step in row["steps"]:
        if step.get("for_each"):
            parts.append("ForEach")
        else:
            parts.append(step["alias"] + (" (per item)" if step["per_item"] else ""))
    text = " → ".join(parts)
    if row.get("needs"):
        text += f"  (needs {', '.join(row['needs'])})"
    return text


def _print(query: PlanningSource, target: str, rows: list[dict[str, Any]]) -> None:
    source = str(query.media) + (" (a sequence)" if query.is_sequence else "")
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markup import escape as e
        from rich.table import Table

        table = Table(title=f"From {e(source)} to {e(target)}")
        for column in ("#", "steps", "cartridges"):
            table.add_column(column, overflow="fold")
        for row in rows:
            carts = sorted({s["cartridge"] or "?" for s in row["steps"] if "cartridge" in s})
            table.add_row(str(row["rank"]), e(_steps_text(row)), e(", ".join(carts)))
        Console().print(table)
    else:
        print(f"from {source} to {target}")
        for row in rows:
            carts = sorted({s["cartridge"] or "?" for s in row["steps"] if "cartridge" in s})
            print(f"{row['rank']}\t{_steps_text(row)}\t{', '.join(carts)}")
    for row in rows:
        print(f"\nmachine {row['rank']}:")
        print(row["machine"] if row["machine"] is not None else "(cannot be written as a machine)")


def _print_targets(query: PlanningSource, targets: list[ReachableTarget]) -> None:
    source = str(query.media) + (" (a sequence)" if query.is_sequence else "")
    print(f"from {source}, what can be made (steps, ways, media):")
    for target in targets:
        print(f"{target.min_path_length}\t{target.path_count}\t{target.media_urn}")


def _refusals(world: PlanningCaps) -> None:
    for refused in world.refused:
        name = f" ({refused.name})" if refused.name else ""
        print(f"refused: {refused.path}{name}: {refused.reason}", file=sys.stderr)


def _refused_rows(world: PlanningCaps) -> list[dict[str, Any]]:
    return [
        {"path": str(r.path), "name": r.name, "kind": str(r.kind), "reason": r.reason}
        for r in world.refused
    ]


_INPUTS = typer.Argument(
    ..., help="Files, folders, globs, - for standard input, or one media: URN."
)
_TO = typer.Option(None, "--to", help="The media URN wanted (without it: what can be made).")
_MEDIA = typer.Option(None, "--media", help="The INPUT's media URN (wins over detection).")
_CARTRIDGES = typer.Option([], "--cartridge", "-c", help="A cartridge to plan over.")
_FROM_DIR = typer.Option(
    [], "--from-dir", help="Plan over every cartridge installed under this folder; repeat it."
)
_CACHE = typer.Option(None, "--cache", help="The manifest cache folder.")
_REFRESH = typer.Option(
    False, "--refresh", help="Start every discovered cartridge again, even those cached."
)
_DEPTH = typer.Option(10, "--depth", help="The longest plan, in steps.")
_LIMIT = typer.Option(20, "--limit", help="How many plans at most.")
_JSON = typer.Option(False, "--json", help="Print one JSON object.")


@app.command("plan")
def plan_command(
    inputs: list[str] = _INPUTS,
    to: str | None = _TO,
    media: str | None = _MEDIA,
    cartridges: list[Path] = _CARTRIDGES,
    from_dir: list[Path] = _FROM_DIR,
    cache: Path | None = _CACHE,
    refresh: bool = _REFRESH,
    depth: int = _DEPTH,
    limit: int = _LIMIT,
    as_json: bool = _JSON,
) -> None:
    """List the ranked ways to turn INPUT into --to MEDIA, each with its machine (without
    --to, what INPUT can become)."""
    from ..errors import CartridgeRuntimeError
    from ..planner import InputError

    scratch = Path(tempfile.mkdtemp(prefix="cartridge-plan-"))
    try:
        sources = CartridgeSources.checked(cartridges, from_dir, cache, refresh=refresh)
        if STDIN in inputs:
            if inputs != [STDIN]:
                raise SourceError("- (standard input) is the only INPUT when it is given")
            inputs = [str(read_stdin(scratch))]
        query = planning_query(inputs, media)
        world = anyio.run(planning_caps, sources)
        code = _answer(query, to, world, depth, limit, as_json)
    except (SourceError, InputError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    except CartridgeRuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE if isinstance(error, ValueError) else _NO_PATH) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    raise typer.Exit(code)


def _answer(
    query: PlanningSource,
    to: str | None,
    world: PlanningCaps,
    depth: int,
    limit: int,
    as_json: bool,
) -> int:
    """Print the plans (or the targets) and return the exit status."""
    from ..planner import complete_first, find_paths, reachable_targets

    _refusals(world)
    document: dict[str, Any] = {"source": str(query.media), "is_sequence": query.is_sequence}
    note = mixed_note(query)
    if to is None:
        targets = reachable_targets(
            world.caps, query.media, is_sequence=query.is_sequence, max_depth=depth
        )
        if as_json:
            document["targets"] = [
                {"media": str(t.media_urn), "min_steps": t.min_path_length,
                 "ways": t.path_count}
                for t in targets
            ]  # fmt: skip
            document |= {"cartridges_started": world.started, "refused": _refused_rows(world)}
            sys.stdout.write(json.dumps(document, indent=2) + "\n")
        else:
            _print_targets(query, targets)
        if note is not None:
            print(note, file=sys.stderr)
        if not targets:
            print(f"error: nothing can be made from {query.media} over these cartridges",
                  file=sys.stderr)  # fmt: skip
            return _NO_PATH
        return 0
    plans = complete_first(
        find_paths(
            world.caps,
            query.media,
            to,
            is_sequence=query.is_sequence,
            max_depth=depth,
            limit=limit,
        )
    )
    rows = plan_rows(world, plans)
    if as_json:
        document |= {"target": to, "cartridges_started": world.started, "plans": rows}
        document["refused"] = _refused_rows(world)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    if not rows:
        for line in no_way_lines(query, to, world.caps, depth):
            print(line, file=sys.stderr)
        return _NO_PATH
    if not as_json:
        _print(query, to, rows)
    return 0
