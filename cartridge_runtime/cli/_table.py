"""Plain tables and sizes as the commands print them: whole lines, never cut.

A table is left-aligned text columns (numbers right-aligned) that a pipe, ``grep`` or a narrow
terminal all receive whole; a size is a human one (``1.5 MiB``) so that a column of byte counts
reads at a glance.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ("columns", "human_size")

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def human_size(n: int) -> str:
    """``n`` bytes as ``512 B``, ``1.5 KiB``, ``90.0 MiB``..."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in _UNITS:
        size /= 1024
        if size < 1024 or unit == _UNITS[-1]:
            return f"{size:.1f} {unit}"
    raise AssertionError("unreachable")


def columns(
    rows: Sequence[Sequence[str]], head: Sequence[str], right: Collection[int] = ()
) -> list[str]:
    """``rows`` under ``head`` as aligned lines; the columns numbered in ``right`` are
    right-aligned (numbers), the last column is not padded."""
    table = [list(head), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = []
    for row in table:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        if len(head) - 1 not in right:
            cells[-1] = row[-1]
        lines.append("  ".join(cells).rstrip())
    return lines
