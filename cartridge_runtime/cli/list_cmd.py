"""``cartridge list [ROOT] [--json] [--cache DIR]``: what is installed under a folder.

Each cartridge found is shown with its name, version, caps (by alias), layout and place; each
one refused with its reason. Manifests come from the cache when the cartridge has not changed,
so a warm listing starts no process (protocol_spec/15-inputs-and-discovery.md, DSC-9).
Exit status: 0 (refused cartridges are listed, not failures), 2 a usage error (ROOT missing or
not a folder).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ._app import app
from ._listing import default_root, list_installed

__all__ = ("list_command", "default_root")

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
    status = list_installed(root, as_json=as_json, cache=cache, refresh=refresh)
    raise typer.Exit(status)
