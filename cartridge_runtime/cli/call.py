"""``cartridge call TARGET CAP [ARGS...] [--arg MEDIA_URN=VALUE | NAME=VALUE]... [-o FILE]``.

Starts TARGET (and any ``--cartridge``) in an :class:`~cartridge_runtime.engine.Engine`, calls
CAP (an alias from TARGET's manifest, or any cap URN TARGET dispatches: exact, reordered or
partial, each taking the same inputs) and streams the main output raw to stdout;
sequence items go one per line. The cap's own flags and positionals are taken as the script's
CLI mode takes them, and piped stdin feeds the main input (:mod:`._call_inputs`); every declared
output can be written to a file (:mod:`._call_outputs`). Progress, logs, END's message and the
optional outputs that did not fire go to stderr. ``--json`` prints the whole result instead.

Exit status: 0 success; 1 a call error (one line ``CODE (class): message [arg=URN]`` on
stderr; with ``-v`` the cartridge's stderr follows); 2 a usage error, found before anything is
spawned when it can be (a missing cartridge or ``@FILE``, a malformed cap URN); 141 when stdout
closed early (``| head``); 128 + N after signal N (the cartridges are killed first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..protocol import NetworkPolicy
from ._app import app
from ._call_inputs import split_arg
from ._call_run import EXIT_USAGE, CallOptions, _err, run_checked

__all__ = ("call_command",)

_split_arg = split_arg  # the name the tests know

_POLICIES = [p.value for p in NetworkPolicy]


@app.command(
    "call",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def call_command(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET", help="The cartridge: a .py script, an executable, or a path."
        ),
    ],
    cap: Annotated[
        str,
        typer.Argument(metavar="CAP", help="A cap URN, or an alias from the cartridge's manifest."),
    ],
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg",
            "-a",
            metavar="MEDIA_URN=VALUE",
            help="An input: MEDIA_URN=VALUE or NAME=VALUE (NAME an argument name from the "
            "manifest); VALUE @PATH for a file's bytes. The cap's own flags and positionals "
            "also work, after CAP, as in the script's CLI mode (use -- before any that clash "
            "with these options). An argument not given gets the manifest's default_value, "
            "as from Engine.call, machines and the script's CLI mode.",
        ),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            "-o",
            metavar="[NAME=]FILE",
            help="Write the main output (FILE) or the output NAME (NAME=FILE) to a file, "
            "atomically: nothing is left behind when the call fails. May be repeated.",
        ),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            metavar="DIR",
            help="Write every output not named by --output to DIR/NAME (the main one too).",
        ),
    ] = None,
    cartridge: Annotated[
        list[str] | None,
        typer.Option(
            "--cartridge",
            metavar="TARGET",
            help="Another cartridge to load (for peer calls); may be repeated.",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="Give up after this many seconds (exit 1, TIMEOUT). Default: no limit.",
        ),
    ] = None,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            metavar="|".join(_POLICIES),
            show_default=False,
            help="The network policy the cartridge gets. Default: offline (the script's own "
            "CLI mode runs under full).",
        ),
    ] = NetworkPolicy.OFFLINE.value,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="On failure, show the cartridge's stderr; list files written."
        ),
    ] = False,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            "--log-dir",
            metavar="DIR",
            help="Keep each cartridge's stderr in DIR/NAME.stderr.log (default: not kept).",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the whole result as one line of JSON: every output with its items "
            "and their meta, the optional outputs that did not fire, END's message.",
        ),
    ] = False,
) -> None:
    """Call one cap of a cartridge and stream its main output to stdout."""
    if policy not in _POLICIES:
        _err(f"error: --policy must be one of {', '.join(_POLICIES)}")
        raise typer.Exit(EXIT_USAGE)
    opts = CallOptions(
        target=target,
        cap=cap,
        args=tuple(arg or ()),
        tokens=tuple(ctx.args),
        outputs=tuple(output or ()),
        output_dir=output_dir,
        cartridges=tuple(cartridge or ()),
        timeout=timeout,
        policy=NetworkPolicy(policy),
        verbose=verbose,
        log_dir=log_dir,
        as_json=as_json,
    )
    raise typer.Exit(run_checked(opts))
