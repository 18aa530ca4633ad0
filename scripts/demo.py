#!/usr/bin/env python3
"""The main job: the engine drives the bundled cartridges on the bundled samples.

It shows several caps, sequence outputs with per-item meta, a cap with two outputs, a peer
call routed through the engine, progress, and a handled error; then three machines over the
wordkit cartridge (a chain, a per-item map, a router whose optional outputs skip what is
downstream of them), a planned machine, an agent whose scripted model grows its own graph with
two tool rounds before it answers, and a cartridge host in a process of its own behind a Unix
socket that a second engine calls through; then it prints a summary table.
Run it with ``./scripts/demo`` (which also does the set-up).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from cartridge_runtime.engine import (
    CallError,
    Engine,
    EngineError,
    Item,
    OutputData,
    OutputItem,
    OutputResult,
    OutputStarted,
    Result,
)
from cartridge_runtime.engine import Progress as ProgressEvent
from cartridge_runtime.machine import MachineError
from cartridge_runtime.manifest import CapDef

ROOT = Path(__file__).resolve().parent.parent
CARTRIDGES = ROOT / "cartridges"
SAMPLES = CARTRIDGES / "samples"

#: Off a terminal nothing is wrapped short: a cap URN stays whole on its line.
console = Console(width=None if sys.stdout.isatty() else 10_000)


def rule(title: str) -> None:
    """A section title: a rule across a terminal, a plain line elsewhere."""
    if console.is_terminal:
        console.rule(title)
    else:
        console.print(f"\n── {title}")


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def wiring_lines(path: Path) -> list[str]:
    """The machine file's wirings as it writes them (its node and step names)."""
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            line = line[1:-1].strip()
        if "->" in line:
            lines.append(line)
    return lines


def stats_line(stats: Any) -> str:
    """The engine's counters in words: ``0 drops, 0 stragglers, ...``."""
    fields = attrs.asdict(stats) if attrs.has(type(stats)) else vars(stats)
    return ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in fields.items())


def _inputs(
    cap: CapDef, main: bytes | None = None, **by_name: str | bytes
) -> list[tuple[str, Any]]:
    """Inputs for ``cap``: ``main`` under its stdin URN, the others by argument name."""
    out: list[tuple[str, Any]] = []
    for arg in cap.args:
        if arg.has_stdin_source and main is not None:
            out.append((arg.stream_urn, main))
        elif arg.name in by_name:
            out.append((arg.media_urn, by_name[arg.name]))
    return out


class Demo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.rows: list[tuple[str, str, str, str]] = []
        self.failures = 0

    async def machine(self, title: str, path: Path, doc: bytes) -> None:
        """Run the machine in ``path`` on ``doc`` and show its outputs and step counts."""
        rule(f"[bold]{title}[/]")
        console.print(f"  [dim]{path.relative_to(ROOT)}[/]")
        started = time.perf_counter()
        try:
            machine = await self.engine.machine(path)
            for line in wiring_lines(path):
                console.print(f"  [cyan]{escape(line)}[/]", highlight=False)
            result = await self.engine.run_machine(machine, {"doc": doc})
        except (CallError, MachineError) as exc:
            self.failures += 1
            self.rows.append((title, path.name, "[red]failed[/]", str(exc)))
            return
        ms = (time.perf_counter() - started) * 1000
        for name, out in result.outputs.items():
            shown = (
                out.text
                if not out.items
                else ", ".join(
                    repr(i.value.decode() if isinstance(i.value, bytes) else i.value)
                    for i in out.items
                )
            )
            console.print(f"  [bold]{name}[/] = {cut(shown, 160)}")
        for name in result.absent:
            console.print(f"  [bold]{name}[/] is absent")
        steps = ", ".join(
            f"{n}: {r.calls} call{'s' if r.calls != 1 else ''}"
            + (f" ({r.skipped} skipped)" if r.skipped else "")
            for n, r in result.steps.items()
        )
        self.rows.append((title, path.name, "[green]ok[/]", f"{steps} in {ms:.0f} ms"))

    async def agent(self, title: str, folder: Path) -> None:
        """The agent of ``examples/agent``: a scripted model grows its graph with two tool
        rounds, then answers; the conversation and the grown graph are shown."""
        rule(f"[bold]{title}[/]")
        for name in ("model", "weather", "convert"):
            self.engine.add_cartridge(folder / f"{name}.py")
        question = (folder / "question.jsonl").read_text()
        started = time.perf_counter()
        async with self.engine.graph(
            machine=folder / "agent.machine", inputs={"chat": question}
        ) as g:
            result = await g.run()
            for member in g.model.aliases["chat"]:
                node = g.model.nodes[member]
                data = node.value if node.value is not None else result[member].data
                for line in data.decode().splitlines():
                    console.print(f"  [cyan]{escape(line)}[/]", highlight=False)
            console.print(escape(g.tree()), highlight=False)
        ms = (time.perf_counter() - started) * 1000
        if result.error is not None:
            self.failures += 1
            self.rows.append((title, "agent.machine", "[red]failed[/]", result.error.message))
            return
        (answer,) = [n for n in result.nodes.values() if n.name.startswith("answer-")]
        console.print(f"  [bold]answer[/] = {answer.text}")
        grown = len(result.nodes)
        self.rows.append(
            (title, "agent.machine", "[green]ok[/]", f"{grown} nodes (3 seeded) in {ms:.0f} ms")
        )

    async def planned(self, title: str, path: Path, target: str) -> None:
        """Plan from the file ``path`` to ``target`` over every cartridge's caps, show the
        candidates, then run the best one on the file."""
        rule(f"[bold]{title}[/]")
        console.print(f"  [dim]{path.relative_to(ROOT)} → {target}[/]")
        started = time.perf_counter()
        try:
            plans = await self.engine.plan(path, target, limit=3)
            for rank, plan in enumerate(plans, 1):
                console.print(f"  {rank}. {plan.description}", highlight=False)
            if not plans:
                raise CallError("NO_PLAN", "input", f"no way from {path.name} to {target}")
            machine = plans[0].machine
            for line in machine.to_notation().splitlines():
                console.print(f"  [cyan]{line}[/]", highlight=False)
            (node,) = machine.inputs
            data = await anyio.Path(path).read_bytes()
            result = await self.engine.run_machine(machine, {node.name: data})
        except (CallError, MachineError) as exc:
            self.failures += 1
            self.rows.append((title, path.name, "[red]failed[/]", str(exc)))
            return
        ms = (time.perf_counter() - started) * 1000
        for name, out in result.outputs.items():
            values = [
                i.value.decode() if isinstance(i.value, bytes) else i.value for i in out.items
            ]
            shown = ", ".join(repr(v) for v in values[:6]) if out.items else cut(out.text, 160)
            more = f" … {len(values) - 6} more" if len(values) > 6 else ""
            console.print(f"  [bold]{name}[/] ({out.media_urn}) = {shown}{more}", highlight=False)
        self.rows.append(
            (title, path.name, "[green]ok[/]", f"{len(plans)} plans, best ran in {ms:.0f} ms")
        )

    async def relay(self, title: str) -> None:
        """``cartridge host --listen`` runs the interop cartridge in a process of its own
        behind a Unix socket; a second engine, the switch, attaches it and calls through it:
        a peer call (which crosses the socket both ways) and an 8 MiB stream."""
        rule(f"[bold]{title}[/]")
        folder = Path(tempfile.mkdtemp(prefix="cartridge-demo-"))  # owner-only, as RLY needs
        sock, log = folder / "tools.sock", folder / "host.log"
        command = [sys.executable, "-m", "cartridge_runtime.cli", "host", "--listen", str(sock)]
        console.print(f"  [dim]cartridge host --listen {sock} cartridges/interop.py[/]")
        started = time.perf_counter()
        try:
            with log.open("wb") as stderr:
                host = await anyio.open_process(
                    [*command, str(CARTRIDGES / "interop.py")],
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            async with host:
                try:
                    with anyio.fail_after(60):
                        while not sock.exists():  # noqa: ASYNC110 - another process makes the file
                            await anyio.sleep(0.02)
                    detail = await self._through_host(sock)
                finally:
                    host.send_signal(signal.SIGTERM)  # a clean stop: it removes its socket
                    await host.wait()
        except (CallError, EngineError, TimeoutError) as exc:
            self.failures += 1
            said = log.read_text(errors="replace").strip().splitlines()[-3:]
            for line in said:
                console.print(f"  [dim]host: {escape(line)}[/]")
            self.rows.append((title, "tools.sock", "[red]failed[/]", str(exc) or "no socket"))
            return
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        ms = (time.perf_counter() - started) * 1000
        self.rows.append((title, "tools.sock", "[green]ok[/]", f"{detail} in {ms:.0f} ms"))

    async def _through_host(self, sock: Path) -> str:
        async with Engine() as switch:
            name = await switch.add_host(sock)
            (view,) = switch.hosts()
            caps = len(view.inventory.caps)
            console.print(f"  host [bold]{name}[/] attached: {view.state.value}, {caps} caps")
            said = b"hello through a cartridge host"
            answer = await switch.call("cap:peer-echo", [("media:", said)])
            console.print(f"  peer-echo on the host, echo through the switch: {answer.data!r}")
            digest = await switch.call(
                'cap:out="media:enc=utf-8";sha256', [("media:", b"\0" * (8 << 20))]
            )
            console.print(f"  sha256 of 8 MiB streamed over the socket = {digest.data.decode()}")
            for status in switch.status():
                console.print(f"  [dim]{status.name}: {status.state}, on host {status.host}[/]")
        return f"peer call and 8 MiB over {name}"

    async def cap(self, cartridge: str, alias: str) -> CapDef:
        await self.engine.start(cartridge)
        cap = self.engine.manifest(cartridge).find_cap(alias)
        assert cap is not None, f"{cartridge} has no cap {alias!r}"
        return cap

    async def run(
        self,
        title: str,
        cartridge: str,
        alias: str,
        inputs: Callable[[CapDef], list[tuple[str, Any]]],
        show: Callable[[Result], str],
        *,
        expect_error: str | None = None,
    ) -> None:
        cap = await self.cap(cartridge, alias)
        started = time.perf_counter()
        rule(f"[bold]{title}[/]  [dim]{cartridge} · {alias}[/]")
        console.print(f"[dim]{cap.urn}[/]")
        try:
            with Progress(
                TextColumn("  {task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                console=console,
                transient=True,
            ) as bar:
                task = bar.add_task(alias, total=1.0)
                events = []
                async with self.engine.call(cap.urn, inputs(cap)) as response:
                    async for event in response:
                        events.append(event)
                        if isinstance(event, ProgressEvent):
                            bar.update(
                                task, completed=event.progress, description=event.message or alias
                            )
                    result = _result(events, response.end_meta)
        except CallError as exc:
            ms = (time.perf_counter() - started) * 1000
            line = f"{exc.code} ({exc.attribution_class}): {exc.message}"
            if exc.arg_urn:
                line += f"  [arg {exc.arg_urn}]"
            if expect_error is not None and exc.code == expect_error:
                console.print(f"  [yellow]handled error[/] {line}")
                self.rows.append(
                    (title, alias, "[yellow]expected error[/]", f"{exc.code} in {ms:.0f} ms")
                )
            else:
                console.print(f"  [red]unexpected error[/] {line}")
                self.rows.append((title, alias, "[red]FAILED[/]", line))
                self.failures += 1
            return
        ms = (time.perf_counter() - started) * 1000
        if expect_error is not None:
            self.rows.append((title, alias, "[red]FAILED[/]", f"expected {expect_error}"))
            self.failures += 1
            return
        summary = show(result)
        self.rows.append((title, alias, "[green]ok[/]", f"{summary} in {ms:.0f} ms"))


def _result(events: list[Any], end_meta: Any) -> Result:
    """Join streamed events into a :class:`Result` (what ``collect()`` does without the stream)."""
    started: dict[str | None, OutputStarted] = {}
    data: dict[str | None, bytearray] = {}
    items: dict[str | None, list[Item]] = {}
    for ev in events:
        if isinstance(ev, OutputStarted):
            started[ev.output] = ev
            data[ev.output] = bytearray()
            items[ev.output] = []
        elif isinstance(ev, OutputData):
            v = ev.value
            data[ev.output] += v if isinstance(v, bytes) else str(v).encode()
        elif isinstance(ev, OutputItem):
            items[ev.output].append(Item(value=ev.value, meta=ev.meta))
    outputs = {
        key: OutputResult(
            output=key,
            media_urn=st.media_urn,
            is_sequence=st.is_sequence,
            data=bytes(data[key]),
            items=tuple(items[key]),
        )
        for key, st in started.items()
    }
    return Result(outputs=outputs, end_meta=end_meta)


def _items(result: Result, limit: int = 6) -> str:
    main = result.main
    items = list(main.items) if main is not None else []
    for item in items[:limit]:
        meta = json.dumps(dict(item.meta)) if item.meta else ""
        raw = item.value
        if isinstance(raw, bytes):  # text items travel as UTF-8 bytes (emit_text)
            raw = raw.decode("utf-8", errors="replace")
        value = raw if isinstance(raw, str) else json.dumps(raw)
        shown = cut(value.replace("\n", " ⏎ "), 70)
        console.print(f"  • {shown}  [dim]{meta}[/]", highlight=False)
    if len(items) > limit:
        console.print(f"  [dim]… {len(items) - limit} more[/]")
    return f"{len(items)} items"


def _json(result: Result) -> str:
    value = json.loads(result.data)
    console.print_json(data=value)
    return f"{len(result.data)} bytes of JSON"


async def main() -> int:
    sample_txt = (SAMPLES / "sample.txt").read_bytes()
    sample_md = (SAMPLES / "sample.md").read_bytes()
    sample_json = (SAMPLES / "sample.json").read_bytes()
    sample_zip = (SAMPLES / "sample.zip").read_bytes()
    sample_tgz = (SAMPLES / "sample.tar.gz").read_bytes()

    async with Engine() as engine:
        for script in ("text.py", "jsonkit.py", "archive.py", "interop.py", "wordkit.py"):
            engine.add_cartridge(CARTRIDGES / script)
        demo = Demo(engine)

        await demo.run("Text metadata", "text", "metadata", lambda c: _inputs(c, sample_txt), _json)
        await demo.run(
            "Markdown outline (sequence + item meta)",
            "text",
            "outline",
            lambda c: _inputs(c, sample_md),
            _items,
        )
        await demo.run(
            "Markdown in pages of 200 characters (progress)",
            "text",
            "markdown-pages",
            lambda c: _inputs(c, sample_md, size=b"200"),
            _items,
        )

        def query_show(result: Result) -> str:
            n = _items(result)
            stats = [o for key, o in result.outputs.items() if key is not None]
            for o in stats:
                console.print(f"  second output [bold]{o.media_urn}[/]: {o.data.decode()}")
            return f"{n} + stats output"

        await demo.run(
            "JSON query with a statistics output",
            "jsonkit",
            "query",
            lambda c: _inputs(c, sample_json, path="$.store.book[?price<10].title"),
            query_show,
        )
        await demo.run("Zip listing", "archive", "list", lambda c: _inputs(c, sample_zip), _items)
        await demo.run(
            "Tar.gz listing", "archive", "list", lambda c: _inputs(c, sample_tgz), _items
        )

        def extract_show(result: Result) -> str:
            text = result.data.decode(errors="replace")
            console.print(f"  [dim]{escape(cut(text, 200))}[/]")
            return f"{len(result.data)} bytes"

        await demo.run(
            "Extract one entry",
            "archive",
            "extract",
            lambda c: _inputs(c, sample_zip, name="hello.txt"),
            extract_show,
        )

        def peer_show(result: Result) -> str:
            console.print(f"  echoed through a peer call: {result.data.decode()!r}")
            return "peer call ok"

        await demo.run(
            "Peer call (interop peer-echo → echo)",
            "interop",
            "peer-echo",
            lambda c: _inputs(c, b"hello through the engine"),
            peer_show,
        )

        def sha_show(result: Result) -> str:
            console.print(f"  sha256 = {result.data.decode()}")
            return "1 MiB hashed incrementally"

        await demo.run(
            "Streaming 1 MiB (sha256)",
            "interop",
            "sha256",
            lambda c: _inputs(c, b"\x00" * (1 << 20)),
            sha_show,
        )
        await demo.run(
            "A handled error (bad JSON path)",
            "jsonkit",
            "query",
            lambda c: _inputs(c, sample_json, path="$.[[["),
            str,
            expect_error="INVALID_PATH",
        )
        await demo.run(
            "A handled error (missing archive entry)",
            "archive",
            "extract",
            lambda c: _inputs(c, sample_zip, name="no-such-file"),
            str,
            expect_error="ENTRY_NOT_FOUND",
        )

        for name, title in (
            ("chain", "Machine: a chain (split -> join)"),
            ("shout", "Machine: a per-item map (upper runs once per word)"),
            ("route", "Machine: a router with optional outputs"),
        ):
            await demo.machine(title, SAMPLES / "machines" / f"{name}.machine", sample_txt)

        await demo.planned(
            "Planned: a Markdown file's kept words (nobody wrote this machine)",
            SAMPLES / "sample.md",
            "media:enc=utf-8;kept;word",
        )

        await demo.agent(
            "Graph: an agent grows two tool rounds, then answers", ROOT / "examples" / "agent"
        )
        await demo.relay("Relay: a cartridge host behind a Unix socket, called by a switch")

        table = Table(title="cartridge-runtime demo: the engine driving the bundled cartridges")
        for col in ("scenario", "cap", "result", "detail"):
            table.add_column(col)
        for row in demo.rows:
            table.add_row(*row)
        console.print(table)
        stats = engine.stats()
        console.print(f"[dim]engine stats: {stats_line(stats)}[/]")
        return 1 if demo.failures else 0


def parse_args(argv: list[str]) -> None:
    """``--help`` prints what the demo does; it takes no other option."""
    import argparse

    summary, _, rest = (__doc__ or "").partition("\n\n")
    parser = argparse.ArgumentParser(
        prog="./scripts/demo",
        description=summary,
        epilog=rest.strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)


if __name__ == "__main__":
    parse_args(sys.argv[1:])
    sys.exit(anyio.run(main))
