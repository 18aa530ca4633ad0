"""``cartridge manifest TARGET [--json]``: start a cartridge for real and show its manifest.

The cartridge goes through the whole start-up (HELLO, identity check, manifest validation,
POLICY), so this also proves it starts. The manifest is printed as a rich tree of caps with
their aliases, arguments (and sources) and outputs, or as JSON with ``--json``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import typer

from ._app import app
from ._console import console


async def _load(target: str) -> tuple[Any, str | None]:
    from ..engine import CallError, Engine

    async with Engine() as engine:
        try:
            name = engine.add_cartridge(target)
            await engine.start(name)
        except CallError as exc:
            tail = getattr(exc, "stderr_tail", "")
            return None, exc.one_line() + (
                f"\n{tail}" if tail and tail not in exc.one_line() else ""
            )
        return engine.manifest(name), None


def _source_text(src: Any) -> str:
    kind = type(src).__name__
    if kind == "StdinSource":
        return f"stdin {src.media_urn}"
    if kind == "PositionSource":
        return f"position {src.index}"
    return f"flag {getattr(src, 'flag', src)}"


def _tree(manifest: Any) -> Any:
    from rich.markup import escape as e
    from rich.tree import Tree

    head = f"{e(manifest.version)} ({manifest.channel}) — {e(manifest.description)}"
    root = Tree(f"[bold]{e(manifest.name)}[/] {head}")
    for group in manifest.cap_groups:
        node = root.add(f"[bold]group[/] {e(group.name)}")
        for cap in group.caps:
            c = node.add(
                f"[cyan]{e(', '.join(cap.aliases))}[/]  {e(cap.title)}  [dim]{e(cap.urn)}[/]"
            )
            if cap.cap_description:
                c.add(f"[dim]{e(cap.cap_description)}[/]")
            for a in cap.args:
                flags = " ".join(
                    x
                    for x in (
                        "required" if a.required else "optional",
                        "sequence" if a.is_sequence else "",
                        "streaming" if a.streaming else "",
                    )
                    if x
                )
                sources = "; ".join(_source_text(s) for s in a.sources)
                c.add(f"arg [green]{e(a.name)}[/] {e(a.media_urn)} ({flags}) ← {e(sources)}")
            for o in cap.outputs:
                flags = " ".join(
                    x
                    for x in ("optional" if o.optional else "", "sequence" if o.is_sequence else "")
                    if x
                )
                c.add(
                    f"out [magenta]{e(o.name)}[/] {e(o.media_urn)}"
                    + (f" ({flags})" if flags else "")
                )
    return root


@app.command("manifest")
def manifest_command(
    target: str = typer.Argument(
        ..., help="The cartridge: a .py script, an executable, or a path."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the manifest JSON instead of a tree."
    ),
) -> None:
    """Start a cartridge (handshake + identity check) and print its manifest."""
    manifest, error = anyio.run(_load, target)
    if error is not None:
        print(error, file=sys.stderr)
        raise typer.Exit(1)
    if as_json:
        sys.stdout.write(manifest.to_pretty_json() + "\n")
    else:
        console().print(_tree(manifest))
    raise typer.Exit(0)
