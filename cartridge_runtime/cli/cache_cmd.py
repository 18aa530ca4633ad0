"""``cartridge cache ls|clear|gc``: the step cache of machine runs.

The cache folder is ``--cache`` (``--dir`` is an older name for it), else ``$CARTRIDGE_HOME/steps`` (default
``~/.cache/cartridge/steps``), the one ``cartridge run`` stores into. ``ls`` lists the entries
(most recently used first), ``clear`` removes them all, ``gc`` removes blobs no entry names and
the partial files of runs that died (never a live run's), then, with ``--max-size``, the least
recently used entries until the blobs fit.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ..engine import CacheError, CacheStore
from ..engine import default_step_cache_dir as default_cache_dir
from ._app import sub_app
from ._table import columns, human_size

__all__ = ("parse_size",)

cache_app = sub_app("cache", "Manage the step cache of machine runs.")

_Dir = Annotated[
    Path | None,
    typer.Option(
        "--cache", metavar="DIR", help="The cache folder (default: $CARTRIDGE_HOME/steps)."
    ),
]
#: The option's older name, still taken, no longer shown.
_OldDir = Annotated[Path | None, typer.Option("--dir", hidden=True)]
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``1024`` (bytes), ``10KiB``... as bytes.

    :raises ValueError: not a size.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtb]?)(?:i?b)?\s*", text.lower())
    if found is None:
        raise ValueError(f"{text!r} is not a size (such as 500M or 2G)")
    return int(float(found.group(1)) * _UNITS[found.group(2)])


def _store(folder: Path | None, old_folder: Path | None = None) -> CacheStore:
    try:
        return CacheStore(folder or old_folder or default_cache_dir())
    except CacheError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(2) from None


@cache_app.command("ls")
def ls_command(
    folder: _Dir = None,
    old_folder: _OldDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List cached step calls: step, cap, size, when stored."""
    store = _store(folder, old_folder)
    entries = store.entries()
    if as_json:
        for entry in entries:
            print(json.dumps({"key": entry.key, "step": entry.step, "cap": entry.cap,
                              "size": entry.size, "created": entry.created}))  # fmt: skip
        return
    rows = [
        (
            entry.key[:12],
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(entry.created)),
            human_size(entry.size),
            entry.step,
            entry.cap,
        )
        for entry in entries
    ]
    if rows:
        head = ("key", "stored (UTC)", "size", "step", "cap")
        print("\n".join(columns(rows, head, right={2})))
    print(f"{len(entries)} entries, {human_size(store.size())} in {store.root}", file=sys.stderr)


@cache_app.command("clear")
def clear_command(folder: _Dir = None, old_folder: _OldDir = None) -> None:
    """Remove every cached step call."""
    store = _store(folder, old_folder)
    store.clear()
    print(f"cleared {store.root}", file=sys.stderr)


@cache_app.command("gc")
def gc_command(
    folder: _Dir = None,
    old_folder: _OldDir = None,
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", help="Keep the most recently used entries within this size."),
    ] = None,
) -> None:
    """Remove unreferenced blobs, partial files of runs that died and, with --max-size, old
    entries."""
    try:
        limit = parse_size(max_size) if max_size is not None else None
    except ValueError as error:
        print(f"error: --max-size: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    store = _store(folder, old_folder)
    removed, freed = store.gc(limit)
    print(f"removed {removed} entries, freed {freed} bytes; {store.size()} bytes left",
          file=sys.stderr)  # fmt: skip
