"""What ``cartridge list`` does and prints, without typer.

The command's module registers it on the typer application; a plain ``cartridge list [ROOT]
[--json] [--cache DIR] [--refresh]`` is parsed here instead (:func:`quick_list`), so that a
listing costs the interpreter, the discovery and the manifest model, and no command-line
framework. Anything else (help, an unknown option, a missing value) goes to typer, whose
messages stay the command's own.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..manifest import CAP_IDENTITY
from ._table import columns
from ._usage import USAGE_STATUS

if TYPE_CHECKING:
    from ..discovery import Discovery

__all__ = ("default_root", "list_installed", "quick_list")


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
    """The listing as plain columns (no wrapping, so each line greps whole)."""
    out: list[str] = []
    if discovery.found:
        out.append(f"Cartridges under {discovery.root}:")
        rows = [
            (f.name, f.version, ", ".join(f.aliases), str(f.layout), str(f.where))
            for f in discovery.found
        ]
        out += columns(rows, ("name", "version", "caps", "layout", "where"))
    else:
        out.append(f"No cartridge found under {discovery.root}.")
    if discovery.refused:
        out.append("")
        out.append("Not hosted:")
        refused = [(str(r.path), f"{r.kind}: {r.reason}") for r in discovery.refused]
        out += columns(refused, ("where", "why"))
    out.append(
        f"{len(discovery.found)} found, {len(discovery.refused)} not hosted; "
        f"{discovery.cache_hits} manifests from the cache, {discovery.spawns} started"
    )
    sys.stdout.write("\n".join(out) + "\n")
    for line in discovery.cache_errors:
        print(f"warning: cache not written: {line}", file=sys.stderr)


class _Misses(Exception):
    """The manifest cache does not hold every cartridge: the engine must start some."""


async def _cache_only(commands: Sequence[tuple[str, ...]]) -> Any:
    raise _Misses


def _from_cache(root: Path, cache: Path | None) -> Discovery | None:
    """What is installed under ``root`` when the manifest cache holds every cartridge, else
    ``None``. Such a discovery never waits on anything, so its coroutine is run to its end
    here, with no event loop to import and start.

    :raises RootNotFound: ``root`` is not a folder.
    """
    from ..discovery import find_installed

    steps = find_installed(root, starter=_cache_only, cache=cache)
    try:
        steps.send(None)
    except StopIteration as finished:
        found: Discovery = finished.value
        return found
    except _Misses:
        return None
    steps.close()  # it waited on something after all: let the engine do it
    return None


def _discover(root: Path, cache: Path | None, refresh: bool) -> Discovery:
    """What is installed under ``root``: from the manifest cache alone when it holds every
    cartridge (neither the engine nor an event loop is loaded), else through the engine,
    which starts the ones the cache lacks."""
    found = None if refresh else _from_cache(root, cache)
    if found is not None:
        return found
    import anyio

    from ..engine import discover

    return anyio.run(lambda: discover(root, cache=cache, refresh=refresh))


def list_installed(root: Path | None, *, as_json: bool, cache: Path | None, refresh: bool) -> int:
    """Print what is installed under ``root`` (``None``: :func:`default_root`); the exit
    status."""
    from ..discovery import Discovery, RootNotFound

    where = root if root is not None else default_root()
    try:
        discovery = _discover(where, cache, refresh)
    except RootNotFound as error:
        if root is not None:
            print(f"error: {error}", file=sys.stderr)
            return USAGE_STATUS
        # Nothing installed yet: the default folder is made by the first install, not here.
        discovery = Discovery(
            root=where, found=(), refused=(), cache_hits=0, spawns=0, cache_dir=None
        )
    if as_json:
        sys.stdout.write(json.dumps(_as_json(discovery), indent=2) + "\n")
    else:
        _print_tables(discovery)
    return 0


def quick_list(args: Sequence[str]) -> int | None:
    """Run ``cartridge list ARGS`` when ``args`` are plain (a ROOT, the two flags, ``--cache
    DIR``); ``None`` when they are anything else, for typer to parse and explain."""
    root: Path | None = None
    cache: Path | None = None
    as_json = refresh = False
    tokens = iter(args)
    for token in tokens:
        if token == "--json":
            as_json = True
        elif token == "--refresh":
            refresh = True
        elif token == "--cache" or token.startswith("--cache="):
            value = token[len("--cache=") :] if "=" in token else next(tokens, "")
            if not value or cache is not None:
                return None
            cache = Path(value)
        elif token and not token.startswith("-") and root is None:
            root = Path(token)
        else:
            return None
    return list_installed(root, as_json=as_json, cache=cache, refresh=refresh)
