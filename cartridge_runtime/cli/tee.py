"""``cartridge tee --out DIR -- TARGET...``: a recording stand-in for a cartridge.

Point any host at this command instead of the cartridge; it runs TARGET, passes both
directions through unchanged, and records them to DIR for ``cartridge trace DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app


@app.command(
    "tee",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def tee(
    target: Annotated[
        list[str], typer.Argument(help="The real cartridge command (a .py runs with this Python).")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Directory for the two captures and their index.")
    ],
) -> None:
    """Run TARGET, copying stdin/stdout byte for byte and recording both directions."""
    from ..conformance._tee import run_tee

    raise typer.Exit(run_tee(target, out))
