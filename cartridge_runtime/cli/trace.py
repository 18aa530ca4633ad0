"""``cartridge trace FILE [FILE2]``: decode raw byte captures into frames.

FILE may be a ``cartridge tee`` directory (both directions, interleaved in arrival order),
or one capture file per direction. ``--jsonl`` prints JSON lines in the format of
``protocol_spec/vectors/frames``; the default is a readable listing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import app


def _direction(path: Path, default: str) -> str:
    from ..conformance._trace import C2H, H2C

    name = path.name.lower()
    if "cartridge-to-host" in name or "c2h" in name or "stdout" in name:
        return C2H
    if "host-to-cartridge" in name or "h2c" in name or "stdin" in name:
        return H2C
    return default


def _load_index(*dirs: Path) -> list[dict[str, Any]] | None:
    from ..conformance._trace import INDEX_NAME

    for d in dirs:
        p = d / INDEX_NAME
        if p.is_file():
            return [
                json.loads(line)
                for line in p.read_text(encoding="utf-8").splitlines()
                if line.strip()
            ]
    return None


def load_frames(file: Path, file2: Path | None = None) -> list[Any]:
    """The capture frames of FILE (a tee directory or one direction) and FILE2, merged."""
    from ..conformance._trace import C2H, H2C, capture_names, merge_directions, read_capture

    if file.is_dir():
        names = capture_names(file)
        h2c = list(read_capture(names[H2C].read_bytes(), H2C)) if names[H2C].exists() else []
        c2h = list(read_capture(names[C2H].read_bytes(), C2H)) if names[C2H].exists() else []
        return merge_directions(h2c, c2h, _load_index(file))
    first_dir = _direction(file, H2C)
    first = list(read_capture(file.read_bytes(), first_dir))
    if file2 is None:
        return first
    second_dir = _direction(file2, C2H if first_dir == H2C else H2C)
    second = list(read_capture(file2.read_bytes(), second_dir))
    h2c, c2h = (first, second) if first_dir == H2C else (second, first)
    index = _load_index(file.parent) if file.parent == file2.parent else None
    return merge_directions(h2c, c2h, index)


@app.command("trace")
def trace(
    file: Annotated[
        Path, typer.Argument(exists=True, help="A tee directory, or a capture of one direction.")
    ],
    file2: Annotated[
        Path | None, typer.Argument(exists=True, help="The capture of the other direction.")
    ] = None,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="JSON lines in the vectors' format.")
    ] = False,
) -> None:
    """Decode raw byte captures into a frame listing (or JSON lines)."""
    from ..conformance._trace import listing_line, vector_line

    frames = load_frames(file, file2)
    state: dict[str, Any] = {}
    bad = 0
    for n, f in enumerate(frames, 1):
        if f.error:
            bad += 1
        if jsonl:
            typer.echo(json.dumps(vector_line(f, state), separators=(",", ":")))
        else:
            typer.echo(listing_line(n, f))
    if not jsonl:
        typer.echo(f"{len(frames)} frames" + (f", {bad} undecodable" if bad else ""))
    raise typer.Exit(1 if bad else 0)
