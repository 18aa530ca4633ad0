"""The ``cartridge`` command-line tool (typer app).

Sub-commands are registered by their own modules (``call``, ``manifest``, ``conform``,
``trace``, ``tee``, ``new``, ``machine``, ``run``, ``runs``, ``cache``, ``list``, ``plan``, ``host``) so
that each stays small; this module only assembles the app.
"""

from __future__ import annotations

import typer
import typer.main

from .._version import __version__

app = typer.Typer(
    name="cartridge",
    help="Run, call, test and certify Bifaci v6 cartridges.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"cartridge-runtime {__version__} (Bifaci protocol v6)")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """Run, call, test and certify Bifaci v6 cartridges."""


def _register_subcommands() -> None:
    """Import the sub-command modules that exist; each adds itself to ``app``."""
    import importlib

    for name in (
        "call",
        "manifest_cmd",
        "conform",
        "trace",
        "tee",
        "new",
        "machine_cmd",
        "run_cmd",
        "list_cmd",
        "plan_cmd",
        "runs_cmd",
        "cache_cmd",
        "host_cmd",
    ):
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise


def main() -> None:
    """Console-script entry point."""
    from ._help import plain_help

    _register_subcommands()
    command = plain_help(typer.main.get_command(app))
    command(prog_name="cartridge")
