"""``cartridge conform TARGET`` (or ``--host SOCKET``): certify a cartridge, or a cartridge host
behind its relay socket, against Bifaci v6.

Prints a table (id, title, level, result, one-line detail), then ``N passed, N failed, N
skipped``; the exit status is 0 only when every MUST check passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import app


@app.command("conform")
def conform(
    target: Annotated[
        str | None,
        typer.Argument(help="The cartridge: a .py script (run with this Python) or an executable."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Certify the cartridge host listening on this Unix socket."),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only these check ids (repeat, or give a comma list)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON to this file.")
    ] = None,
    junit_out: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report to this file.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.5, help="Seconds each check may take.")
    ] = 20.0,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", min=0, help="Checks run at once (0 = automatic: 3 per CPU core, 4 to 8)."
        ),
    ] = 0,
) -> None:
    """Run the conformance catalogue against TARGET (or the host catalogue against --host)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..conformance import Status, run_host_conformance

    console = Console(highlight=False)
    if (target is None) == (host is None):
        console.print("[red]error:[/] give a cartridge TARGET or --host SOCKET (one of them)")
        raise typer.Exit(2)
    if host is not None:
        report = run_host_conformance(host, timeout=timeout)
        target = f"host {host}"
    else:
        assert target is not None
        report = _cartridge_report(console, target, only, timeout, jobs)
    table = Table(title=f"Bifaci v6 conformance: {escape(target)}", title_justify="left")
    for col in ("id", "title", "level", "result"):
        table.add_column(col)
    table.add_column("detail", overflow="fold")
    style = {Status.PASS: "green", Status.FAIL: "red", Status.SKIP: "yellow"}
    for r in report.results:
        result = str(r.status).upper()
        if r.status is Status.FAIL and str(r.level) == "SHOULD":
            result = "FAIL (should)"
        detail = r.detail.splitlines()[0] if r.detail else ""
        if r.known_defect:
            detail += f"  [known defect: {r.known_defect}]"
        table.add_row(
            r.id, escape(r.title), str(r.level), f"[{style[r.status]}]{result}[/]", escape(detail)
        )
    console.print(table)
    if json_out is not None:
        report.write_json(json_out)
    if junit_out is not None:
        report.write_junit(junit_out)
    typer.echo(report.summary())
    raise typer.Exit(0 if report.ok else 1)


def _cartridge_report(
    console: Any, target: str, only: list[str] | None, timeout: float, jobs: int
) -> Any:
    from rich.markup import escape

    from ..conformance import run_conformance, select_checks

    try:
        select_checks(only)
    except ValueError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    with console.status(f"certifying {escape(target)} ..."):
        try:
            return run_conformance(target, only=only, timeout=timeout, jobs=jobs or None)
        except (FileNotFoundError, PermissionError) as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(2) from None
