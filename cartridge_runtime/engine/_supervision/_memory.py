"""Memory guard: how much memory an instance holds, and whether that is too much.

Rules
-----
1. An instance's figure is the resident memory of its whole process tree (a cartridge may run
   its model in a child process).
2. Past its cartridge's ``memory_limit`` the instance is killed, each of its calls ends with
   ``OOM_KILLED`` (class ``resource``) naming the limit and the figure, and the next call starts
   it again.
3. The watchdog sampling this is the portable part. On Linux the engine also sets the
   instance's ``RLIMIT_AS`` (address space) to ``EngineConfig.memory_backstop`` times the limit,
   so a process that grows between two samples fails an allocation instead of freezing the
   machine; address space runs well ahead of resident memory, hence the factor.

The figures come from ``/proc`` (Linux); elsewhere there are none yet, and only the operating
system's own limits apply.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

__all__ = (
    "describe_bytes",
    "memory_exceeded",
    "resident_bytes",
    "set_address_limit",
)

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

#: Most processes counted in one instance's tree (a runaway fork must not make a sample slow).
_MAX_TREE = 256


def memory_exceeded(resident: int | None, limit: int | None) -> bool:
    """Whether an instance holding ``resident`` bytes is past ``limit`` (rule 2); no figure
    or no limit is never past it."""
    return resident is not None and limit is not None and resident > limit


def describe_bytes(size: int) -> str:
    """``52.4 MiB`` and the like, for messages."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def resident_bytes(pid: int) -> int | None:
    """The resident memory of ``pid`` and its descendants (rule 1); ``None`` when it cannot be
    read (the process is gone, or this platform has no source of figures)."""
    if _PROC.is_dir():
        return _proc_tree_rss(pid)
    return None


def _proc_rss(pid: int) -> int | None:
    try:
        fields = (_PROC / str(pid) / "statm").read_bytes().split()
    except OSError:
        return None
    return int(fields[1]) * _PAGE


def _proc_children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return children
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            children += [int(c) for c in (task / "children").read_bytes().split()]
    return children


def _proc_tree_rss(pid: int) -> int | None:
    total = _proc_rss(pid)
    if total is None:
        return None
    seen = {pid}
    todo = _proc_children(pid)
    while todo and len(seen) < _MAX_TREE:
        child = todo.pop()
        if child in seen:
            continue
        seen.add(child)
        rss = _proc_rss(child)
        if rss is not None:
            total += rss
            todo += _proc_children(child)
    return total


def set_address_limit(pid: int, limit: int) -> bool:
    """Set ``pid``'s ``RLIMIT_AS`` to ``limit`` bytes (rule 3); whether that was allowed
    (Linux only: other systems have no way to set another process's limits)."""
    if not sys.platform.startswith("linux"):
        return False
    import resource

    try:
        _, hard = resource.prlimit(pid, resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY and hard < limit:
            limit = hard
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError):
        return False
    return True
