"""The ``cartridge`` command-line tool.

Each sub-command lives in its own module (``call``, ``manifest``, ``conform``, ``trace``,
``tee``, ``new``, ``machine``, ``run``, ``runs``, ``log``, ``report``, ``cache``, ``list``,
``plan``), which registers itself on the typer application of :mod:`._app`. ``main`` answers
help and ``--version`` from stored texts (:mod:`._quick`), and otherwise imports only the
module of the command being run, so that a command starts at once. A plain ``cartridge call
TARGET CAP`` starts its cartridge before anything else (:mod:`._early`), so that the
cartridge's start and the command's own overlap.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ("main",)


def main() -> None:
    """Console-script entry point."""
    from ._quick import completing, quick_answer

    argv = sys.argv[1:]
    answer = quick_answer(argv, os.environ)
    if answer is not None:
        stream = sys.stderr if answer.to_stderr else sys.stdout
        stream.write(answer.text)
        stream.flush()
        raise SystemExit(answer.status)
    first = argv[0] if argv else ""
    if first == "list":
        # A plain listing needs no command-line framework (see _listing).
        from ._listing import quick_list

        status = quick_list(argv[1:])
        if status is not None:
            sys.stdout.flush()
            raise SystemExit(status)
    elif first == "call":
        # So does a plain call, TARGET and CAP alone (see _call_run); its cartridge starts
        # first, so that it starts while the command imports (see _early). What a call's start
        # allocates lives on: no collection runs until the cartridge started (see _call_run).
        import gc

        from ._early import spawn_for_call

        gc.disable()
        early = spawn_for_call(argv[1:])
        try:
            from ._call_run import quick_call

            status = quick_call(argv[1:], early)
        finally:
            if early is not None:
                early.discard()  # killed, unless the engine took it
            gc.enable()
        if status is not None:
            raise SystemExit(status)
    from ._app import build_command
    from ._commands import module_of

    # A known command loads its own module only; an unknown one, or a shell completing,
    # loads them all (for the suggestions and the completions).
    only = [first] if module_of(first) is not None and not completing(os.environ) else None
    command = build_command(only)
    command(args=argv, prog_name="cartridge")


def __getattr__(name: str) -> Any:
    """``cartridge_runtime.cli.app``: the typer application with every command registered."""
    if name == "app":
        from ._app import app, build_command

        build_command()
        return app
    raise AttributeError(name)
