"""``cartridge list [ROOT] [--json] [--cache DIR]``: what is installed under a folder.

Each cartridge found is shown with its name, version, caps (by alias), layout and place; each
one refused with its reason. Manifests come from the cache when the cartridge has not changed,
so a warm listing starts no process (protocol_spec/15-inputs-and-discovery.md, DSC-9).
Exit status: 0 (refused cartridges are listed, not failures), 2 a usage error (ROOT missing or
not a folder).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer

from ..manifest import CAP_IDENTITY
from ._app import app

if TYPE_CHECKING:
    from ..discovery import Discovery

__all__ = ("list_command", "default_root")

_USAGE = 2


def default_root() -> Path:
    """Where ``cartridge list`` looks without a ROOT: ``$XDG_DATA_HOME/cartridge-runtime/
    cartridges``, or ``~/.local/share/...`` without it."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "cartridge-runtime" / "cartridges"


def _as_json(discovery: Discovery) -> dict[str, Any]:
    return {
        "root": str(discovery.root),
        "found": [
            {
                "name": f.name,
                "version": f.version,
                "layout": str(f.layout),
                "where": str(f.where),
                "entry": str(f.entry),
                "command": list(f.command),
                "caps": [
                    {"urn": cap.urn, "aliases": list(cap.aliases)}
                    for cap in f.caps
                    if cap.urn != CAP_IDENTITY
                ],
                "from_cache": f.from_cache,
            }
            for f in discovery.found
        ],
        "refused": [
            {
                "path": str(r.path),
                "kind": str(r.kind),
                "reason": r.reason,
                "name": r.name,
                "version": r.version,
            }
            for r in discovery.refused
        ],
        "cache_hits": discovery.cache_hits,
        "spawns": discovery.spawns,
        "cache_dir": None if discovery.cache_dir is None else str(discovery.cache_dir),
        "cache_errors": list(discovery.cache_errors),
    }


def _print_tables(discovery: Discovery) -> None:
    from rich.console import Console
    from rich.markup import escape as e
    from rich.table import Table

    console = Console()
    if discovery.found:
        table = Table(title=f"Cartridges under {e(str(discovery.root))}")
        for column in ("name", "version", "caps", "layout", "where"):
            table.add_column(column, overflow="fold")
        for f in discovery.found:
            table.add_row(
                e(f.name), e(f.version), e(", ".join(f.aliases)), str(f.layout), e(str(f.where))
            )
        console.print(table)
    else:
        console.print(f"No cartridge found under {e(str(discovery.root))}.")
    if discovery.refused:
        refused = Table(title="Not hosted")
        for column in ("where", "why"):
            refused.add_column(column, overflow="fold")
        for r in discovery.refused:
            refused.add_row(e(str(r.path)), e(f"{r.kind}: {r.reason}"))
        console.print(refused)
    console.print(
        f"{len(discovery.found)} found, {len(discovery.refused)} not hosted; "
        f"{discovery.cache_hits} manifests from the cache, {discovery.spawns} started"
    )
    for line in discovery.cache_errors:
        console.print(f"[yellow]warning:[/] cache not written: {e(line)}")


_ROOT = typer.Argument(None, help="The folder to search (default: the per-user cartridges folder).")
_CACHE = typer.Option(
    None, "--cache", help="The manifest cache folder (default: the per-user cache)."
)


@app.command("list")
def list_command(
    root: Path | None = _ROOT,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    cache: Path | None = _CACHE,
    refresh: bool = typer.Option(
        False, "--refresh", help="Start every cartridge again, even those in the cache."
    ),
) -> None:
    """List the cartridges installed under ROOT: name, version, caps and where."""
    from ..discovery import Discovery, RootNotFound
    from ..engine import discover

    where = root if root is not None else default_root()
    try:
        discovery = anyio.run(lambda: discover(where, cache=cache, refresh=refresh))
    except RootNotFound as error:
        if root is not None:
            print(f"error: {error}", file=sys.stderr)
            raise typer.Exit(_USAGE) from None
        # Nothing installed yet: the default folder is made by the first install, not here.
        discovery = Discovery(
            root=where, found=(), refused=(), cache_hits=0, spawns=0, cache_dir=None
        )
    if as_json:
        sys.stdout.write(json.dumps(_as_json(discovery), indent=2) + "\n")
    else:
        _print_tables(discovery)
    raise typer.Exit(0)
