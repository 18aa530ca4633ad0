"""Which module defines each ``cartridge`` sub-command, known without importing any of them.

``main`` reads this table to import only the module of the command being run (typer, rich and
the engine are heavy: a command that does not need them does not pay for them), and the house
test checks it against the commands the modules register.
"""

from __future__ import annotations

from typing import Final

__all__ = ("COMMAND_MODULES", "module_of")

#: Command name -> the module (under ``cartridge_runtime.cli``) whose import registers it.
COMMAND_MODULES: Final[dict[str, str]] = {
    "call": "call",
    "manifest": "manifest_cmd",
    "conform": "conform",
    "trace": "trace",
    "tee": "tee",
    "new": "new",
    "run": "run_cmd",
    "list": "list_cmd",
    "plan": "plan_cmd",
    "runs": "runs_cmd",
    "log": "runs_cmd",
    "report": "runs_cmd",
    "machine": "machine_cmd",
    "cache": "cache_cmd",
    "graph": "graph_cmd",
    "host": "host_cmd",
}


def module_of(command: str) -> str | None:
    """The module registering ``command`` (``None``: no such command)."""
    return COMMAND_MODULES.get(command)
