"""``cartridge graph run FILE -c PATH ... -i NAME=VALUE ...`` and ``cartridge graph show RUN``.

``graph run`` seeds a graph from machine notation (each machine node is an alias of the same
name, each step a cap node) and runs it with growth allowed: the cartridges' calls may add
nodes through the grow-graph cap (see ``docs/graphs.md``). It prints each machine output and
the grown graph as a tree, and saves the graph under ``$CARTRIDGE_HOME/graphs`` (or
``--graphs-dir``) as ``ID.json``, which ``--load`` resumes (finished nodes are not run again)
and ``graph show`` draws, beside ``ID.events.jsonl`` (every operation with the node that made
it, every node's start and end); ``--report FILE`` writes the HTML page of the grown graph.
Exit status: 0 success, 1 a node failed (one line names it), 2 a usage error.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import typer

from ..engine import Engine, default_runs_dir
from ..errors import CartridgeRuntimeError
from ..graph import GraphRefused, NodeState, load_graph, render_html, render_tree
from ._app import app
from ._paths import cartridge_problem
from ._run_setup import Usage, parse_inputs

graph_app = typer.Typer(help="Run graphs that grow while they run, and show them.")
app.add_typer(graph_app, name="graph")

_USAGE = 2
_FAILED = 1


def default_graphs_dir() -> Path:
    return default_runs_dir().parent / "graphs"


def _new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{time.time_ns() % 1_000_000:06d}"


def _fail(line: str, code: int) -> typer.Exit:
    print(f"error: {line}", file=sys.stderr)
    return typer.Exit(code)


def _values(inputs: dict[str, Any]) -> dict[str, bytes]:
    out = {}
    for name, value in inputs.items():
        if isinstance(value, Path):
            out[name] = value.read_bytes()
        elif isinstance(value, bytes):
            out[name] = value
        else:
            raise Usage(f"--input {name}: a graph's input is text or @FILE")
    return out


async def _run(
    machine: Path,
    cartridges: list[str],
    inputs: dict[str, bytes],
    target: str | None,
    doc: Any,
    save: Path,
    report: Path | None,
) -> int:
    async with Engine() as engine:
        for cartridge in cartridges:
            engine.add_cartridge(cartridge)
        seed = None if doc is not None else machine
        async with engine.graph(machine=seed, inputs=inputs, load=doc) as g:
            result = await g.run(target)
            await anyio.Path(save.parent).mkdir(parents=True, exist_ok=True)
            await anyio.Path(save).write_text(g.dumps())
            events = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in g.log)
            await anyio.Path(save.with_suffix(".events.jsonl")).write_text(events)
            if report is not None:
                await anyio.Path(report).write_text(g.report(save.stem))
            for alias, members in g.model.aliases.items():
                if members and not g.model.is_frozen(alias) and not g.model.readers_of_alias(alias):
                    for member in members:
                        node = result.nodes.get(member)
                        if node is not None and node.state is NodeState.DONE and node.data:
                            print(f"{alias}: {node.text.strip()}")
            print(g.tree(target), file=sys.stderr)
            print(f"graph saved: {save}", file=sys.stderr)
            if result.error is not None:
                print(
                    f"FAILED node {result.failed_node}: {result.error.code}: "
                    f"{result.error.message}",
                    file=sys.stderr,
                )
                return _FAILED
    return 0


@graph_app.command("run")
def graph_run(
    machine: Path = typer.Argument(..., help="The seed: a machine notation file."),  # noqa: B008
    cartridge: list[str] = typer.Option(  # noqa: B008
        [], "--cartridge", "-c", help="A cartridge to host (repeat)."
    ),
    input_: list[str] = typer.Option(  # noqa: B008
        [], "--input", "-i", help="NAME=TEXT or NAME=@FILE for a machine input (repeat)."
    ),
    target: str | None = typer.Option(None, "--target", help="Run toward this node only."),
    load: Path | None = typer.Option(  # noqa: B008
        None, "--load", help="Resume a saved graph (ID.json) instead of seeding one."
    ),
    graphs_dir: Path | None = typer.Option(  # noqa: B008
        None, "--graphs-dir", help="Where graphs are saved (default: $CARTRIDGE_HOME/graphs)."
    ),
    report: Path | None = typer.Option(  # noqa: B008
        None, "--report", help="Write the grown graph's HTML page here (also on failure)."
    ),
) -> None:
    """Run a graph seeded from a machine file; its cartridges may grow it while it runs."""
    if load is None and not machine.is_file():
        raise _fail(f"no machine file at {machine}", _USAGE)
    if load is not None and not load.is_file():
        raise _fail(f"--load {load}: no such file", _USAGE)
    for c in cartridge:
        problem = cartridge_problem(c)
        if problem is not None:
            raise _fail(problem, _USAGE)
    try:
        inputs = _values(parse_inputs(input_))
    except Usage as exc:
        raise _fail(str(exc), _USAGE) from None
    save = (graphs_dir or default_graphs_dir()) / f"{_new_id()}.json"
    try:
        doc = json.loads(load.read_text()) if load is not None else None
    except ValueError as exc:
        raise _fail(f"--load {load}: not JSON ({exc})", _USAGE) from None
    try:
        code = anyio.run(_run, machine, cartridge, inputs, target, doc, save, report)
    except CartridgeRuntimeError as exc:
        raise _fail(f"{type(exc).__name__}: {exc.message}", _FAILED) from None
    raise typer.Exit(code)


def find_graph(graphs_dir: Path, wanted: str) -> Path:
    """The saved graph ``wanted`` names: a file, an id, a unique prefix of one, or ``last``."""
    given = Path(wanted)
    if given.suffix == ".json" and given.is_file():
        return given
    saved = (
        sorted(
            (p for p in graphs_dir.glob("*.json") if not p.stem.endswith(".events")), reverse=True
        )
        if graphs_dir.is_dir()
        else []
    )
    if not saved:
        raise Usage(f"no graphs saved in {graphs_dir}")
    if wanted == "last":
        return saved[0]
    found = [p for p in saved if p.stem.startswith(wanted)]
    if len(found) != 1:
        raise Usage(f"{wanted!r} names {len(found)} saved graphs in {graphs_dir}")
    return found[0]


@graph_app.command("show")
def graph_show(
    run: str = typer.Argument("last", help="A saved graph: its id, a prefix, last, or a file."),
    node: str | None = typer.Option(None, "--node", help="Draw from this node."),
    graphs_dir: Path | None = typer.Option(  # noqa: B008
        None, "--graphs-dir", help="Where graphs are saved (default: $CARTRIDGE_HOME/graphs)."
    ),
    html_file: Path | None = typer.Option(  # noqa: B008
        None, "--html", help="Also write the graph's HTML page (drawing, nodes, events) here."
    ),
) -> None:
    """Draw a saved graph as a tree, each node with its state."""
    try:
        path = find_graph(graphs_dir or default_graphs_dir(), run)
        model, states, _ = load_graph(path.read_text())
    except Usage as exc:
        raise _fail(str(exc), _USAGE) from None
    except GraphRefused as exc:
        raise _fail(f"{run}: {exc.message}", _USAGE) from None
    if node is not None and node not in model.nodes:
        raise _fail(f"no node {node!r} in {path.name}", _USAGE)
    roots = [node] if node is not None else model.sinks()

    def state_of(name: str) -> NodeState:
        return states.get(name, NodeState.WAITING)

    print(render_tree(model, roots, state_of))
    if html_file is not None:
        events_file = path.with_suffix(".events.jsonl")
        log = (
            [json.loads(line) for line in events_file.read_text().splitlines() if line]
            if events_file.is_file()
            else []
        )
        html_file.write_text(render_html(model, state_of, log=log, title=path.stem))
