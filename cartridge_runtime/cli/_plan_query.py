"""What ``cartridge plan`` and ``cartridge run --to`` share about the user's side of a plan:
the inputs (files, folders, globs, ``-`` for standard input, a declared ``--media``), the
lines that explain "no way", the side arguments given with ``--arg``, and the names planned
outputs get."""

from __future__ import annotations

import collections
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ..manifest import CapDef
    from ..planner import PlanningSource

__all__ = (
    "STDIN",
    "STDIN_NAME",
    "read_stdin",
    "planning_query",
    "mixed_note",
    "no_way_lines",
    "parse_arguments",
    "output_name",
)

#: The input argument that stands for standard input.
STDIN: Final = "-"
#: The name standard input goes by: its copy's file name, and the stem of planned outputs.
STDIN_NAME: Final = "stdin"
#: The extension written for a type that says its format or is text.
_FORMATS: Final = ("json", "csv", "yaml", "xml", "html", "toml", "ndjson", "jsonl")


def read_stdin(folder: Path) -> Path:
    """Standard input copied to ``folder/stdin`` (detection reads its first bytes; a run
    reads it again), in pieces: no copy of it is held in memory.

    :raises ValueError: standard input is empty.
    """
    path = folder / STDIN_NAME
    with path.open("wb") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
    if path.stat().st_size == 0:
        raise ValueError("standard input was empty")
    return path


def planning_query(
    inputs: Sequence[str | Path], media: str | None, *, one_value: bool = False
) -> PlanningSource:
    """The planner's view of the inputs: detected (or of the declared ``media``), a sequence
    when several files or a folder (unless ``one_value``: each file is planned alone).

    :raises InputError: a file that cannot be found or read, a glob that matches nothing.
    :raises InvalidDeclaredMedia: ``media`` is not a media URN.
    """
    from ..planner import planning_source

    given = list(inputs)
    source = given[0] if len(given) == 1 else given
    return planning_source(source, media=media, is_sequence=False if one_value else None)


def mixed_note(query: PlanningSource) -> str | None:
    """When the files are of different types: a line saying so and what it did to the
    source (their common type, often ``media:``, which only caps on any bytes take)."""
    if query.inputs is None or query.inputs.common_media is not None:
        return None
    kinds = collections.Counter(
        detected.path.suffix.lstrip(".").lower() or str(detected.media)
        for detected in query.inputs.files
    )
    counted = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    return (
        f"note: the files are of mixed types ({counted}), so the source is {query.media}, "
        "what they all are; plan one type at a time, or give --media"
    )


def no_way_lines(
    query: PlanningSource, target: str, caps: Sequence[CapDef], depth: int
) -> list[str]:
    """The lines that explain why no plan was found (PLAN-22, PLAN-26): the reason, the
    nearest targets that can be made, and the mixed-files note."""
    from ..planner import explain_no_path

    found = explain_no_path(
        caps, query.media, target, is_sequence=query.is_sequence, max_depth=depth
    )
    reason = found.message.partition(": ")[2].partition("; nearest targets")[0]
    lines = [
        f"error: no way from {query.media} to {target} over these cartridges "
        f"(searched {depth} steps deep): {reason}"
    ]
    if found.nearest:
        named = ", ".join(
            f"{near.media_urn} ({near.min_path_length} "
            f"{'step' if near.min_path_length == 1 else 'steps'})"
            for near in found.nearest
        )
        lines.append(f"nearest targets that can be made: {named}")
    note = mixed_note(query)
    if note is not None:
        lines.append(note)
    return lines


def parse_arguments(given: Sequence[str]) -> dict[str, str]:
    """``--arg NAME=VALUE`` by name (the value is text).

    :raises ValueError: a malformed or repeated one.
    """
    arguments: dict[str, str] = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--arg {text!r}: expected NAME=VALUE")
        if name in arguments:
            raise ValueError(f"--arg {name!r} is given twice")
        arguments[name] = value
    return arguments


def _extension(media_text: str) -> str | None:
    """The extension of a known type: its ``ext``, its format, or ``txt`` for text."""
    from ..urn import MediaUrn

    media = MediaUrn.parse(media_text)
    ext = media.extension()
    if ext:
        return ext
    fmt = media.get_tag("fmt")
    if fmt in _FORMATS:
        return fmt
    if media.get_tag("enc") == "utf-8":
        return "txt"
    return None


def output_name(input_path: Path | str, target: str) -> str:
    """A planned output's file name: the input's stem, the target's marker tags, and the
    extension of a known type (``report.md`` to ``media:enc=utf-8;kept;word`` is
    ``report.kept-word.txt``)."""
    from ..urn import MediaUrn

    stem = Path(input_path).name.partition(".")[0] or Path(input_path).name or STDIN_NAME
    media = MediaUrn.parse(target)
    markers = [key for key, value in sorted(media.tags.items()) if value == "*"]
    label = "-".join(markers) or "out"
    ext = _extension(target)
    return f"{stem}.{label}.{ext}" if ext else f"{stem}.{label}"
