"""``cartridge plan INPUT... --to MEDIA [--cartridge PATH ... | --from-dir ROOT]``.

Plans, without running anything: the INPUTs (files, folders, globs, or one ``media:`` URN)
are detected (their extension, confirmed or corrected by a bounded look at the content), then
the planner lists the ranked ways to reach MEDIA over the caps of the cartridges given. Each
candidate is shown with its steps by alias, the cartridge serving each step, which steps run
per item, and its machine text (what ``cartridge run`` and ``Engine.run_machine`` take).
Cartridges found with ``--from-dir`` plan from the manifest cache: a warm cache starts none.

Exit status: 0 some plan found; 1 no way from the inputs to MEDIA (one line on stderr); 2 a
usage error (nothing is started).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer

from ._app import app
from ._sources import CartridgeSources, SourceError, planning_engine

if TYPE_CHECKING:
    from ..engine import Engine
    from ..planner import Plan, PlanningSource

__all__ = ("plan_command", "serving_cartridges", "plan_rows")

_NO_PATH = 1
_USAGE = 2


def serving_cartridges(engine: Engine, plan: Plan) -> list[str | None]:
    """Per cap step of ``plan``, the name of the first cartridge added whose manifest declares
    that cap (routing picks the first added), or ``None``."""
    names: list[str | None] = []
    for step in plan.cap_steps:
        serving = None
        for status in engine.status():
            manifest = engine.manifest(status.name)
            if manifest is not None and any(
                cap.urn == str(step.cap) for cap in manifest.iter_caps()
            ):
                serving = status.name
                break
        names.append(serving)
    return names


def _label(step: Any) -> str:
    definition = step.definition
    if definition is not None and definition.aliases:
        return str(definition.aliases[0])
    return str(step.title)


def plan_rows(engine: Engine, plans: list[Plan]) -> list[dict[str, Any]]:
    """The plans as plain data: rank, steps (alias, cap, cartridge, types, per item), machine."""
    rows = []
    for rank, plan in enumerate(plans, 1):
        serving = iter(serving_cartridges(engine, plan))
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
    return " → ".join(parts)


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


async def _plan(
    sources: CartridgeSources,
    inputs: list[str],
    target: str,
    depth: int,
    limit: int,
) -> tuple[PlanningSource, list[dict[str, Any]], int]:
    from ..planner import planning_source

    query = await anyio.to_thread.run_sync(
        lambda: planning_source(inputs[0] if len(inputs) == 1 else inputs)
    )
    async with planning_engine(sources) as engine:
        plans = await engine.plan(
            query.media, target, is_sequence=query.is_sequence, max_depth=depth, limit=limit
        )
        started = sum(status.starts for status in engine.status())
        return query, plan_rows(engine, plans), started


_INPUTS = typer.Argument(..., help="Files, folders, globs, or one media: URN.")
_TO = typer.Option(..., "--to", help="The media URN wanted.")
_CARTRIDGES = typer.Option([], "--cartridge", "-c", help="A cartridge to plan over.")
_FROM_DIR = typer.Option(
    None, "--from-dir", help="Plan over every cartridge installed under this folder."
)
_CACHE = typer.Option(None, "--cache", help="The manifest cache folder.")
_DEPTH = typer.Option(10, "--depth", help="The longest plan, in steps.")
_LIMIT = typer.Option(20, "--limit", help="How many plans at most.")
_JSON = typer.Option(False, "--json", help="Print one JSON object.")


@app.command("plan")
def plan_command(
    inputs: list[str] = _INPUTS,
    to: str = _TO,
    cartridges: list[Path] = _CARTRIDGES,
    from_dir: Path | None = _FROM_DIR,
    cache: Path | None = _CACHE,
    depth: int = _DEPTH,
    limit: int = _LIMIT,
    as_json: bool = _JSON,
) -> None:
    """List the ranked ways to turn INPUT into --to MEDIA, each with its machine."""
    from ..errors import CartridgeRuntimeError
    from ..planner import InputError

    try:
        sources = CartridgeSources.checked(cartridges, from_dir, cache)
        query, rows, started = anyio.run(_plan, sources, inputs, to, depth, limit)
    except (SourceError, InputError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    except CartridgeRuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE if isinstance(error, ValueError) else _NO_PATH) from None
    if as_json:
        document = {"source": str(query.media), "is_sequence": query.is_sequence}
        document |= {"target": to, "cartridges_started": started, "plans": rows}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    if not rows:
        print(
            f"error: no way from {query.media} to {to} over these cartridges "
            f"(searched {depth} steps deep)",
            file=sys.stderr,
        )
        raise typer.Exit(_NO_PATH)
    if not as_json:
        _print(query, to, rows)
    raise typer.Exit(0)
