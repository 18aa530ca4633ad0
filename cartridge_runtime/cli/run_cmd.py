"""``cartridge run FILE --cartridge PATH ... --input NAME=VALUE|NAME=@PATH ... [--output-dir DIR]``.

Runs a machine (its notation in FILE) on the cartridges given: every ``--input`` names an input
node of the machine as the text writes it. The outputs go to ``DIR/NAME``, each written to a
temporary file and renamed when the run succeeded (nothing partial is left behind), or, for a
machine with one output and no ``--output-dir``, to stdout. On a terminal a live table shows
each step (its state, runs and items, bytes); at the end a summary table goes to stderr.
``--json`` prints one JSON object instead. Exit status: 0 success, 1 a refused machine or a
failed step (one line on stderr), 2 a usage error (nothing is started), 128 + N after signal N
(SIGINT, SIGTERM, SIGHUP: the temporary files are removed and stderr says ``interrupted``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import anyio
import typer

from . import app
from ._console import console
from ._lines import start_failure_line
from ._paths import cartridge_problem, output_dir_problem

_USAGE = 2
_FAILED = 1


class _Usage(Exception):
    """A usage error: one line, exit 2."""


def _parse_inputs(given: list[str]) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise _Usage(f"--input {text!r}: expected NAME=VALUE or NAME=@PATH")
        if name in inputs:
            raise _Usage(f"--input {name!r} is given twice")
        if value.startswith("@"):
            path = Path(value[1:])
            if not path.is_file():
                raise _Usage(f"--input {name}: no file at {path}")
            inputs[name] = path
        else:
            inputs[name] = value.encode("utf-8")
    return inputs


class _Sinks:
    """Where each output goes: a temporary file in the output folder (renamed at the end), or
    stdout for the one output of a machine run without an output folder."""

    def __init__(self, outputs: list[str], folder: Path | None) -> None:
        self.folder = folder
        self.files: dict[str, tuple[IO[bytes], Path]] = {}
        self.written: dict[str, int] = {}
        self.stdout = sys.stdout.buffer
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            for name in outputs:
                handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
                os.fchmod(handle, 0o666 & ~_umask())  # as open() would have made it
                self.files[name] = (os.fdopen(handle, "wb"), Path(temp))

    def write(self, name: str, value: Any, is_item: bool) -> None:
        data = _bytes_of(value, is_item)
        self.written[name] = self.written.get(name, 0) + len(data)
        if self.folder is None:
            self.stdout.write(data)
            self.stdout.flush()
        else:
            self.files[name][0].write(data)

    def commit(self, absent: tuple[str, ...]) -> dict[str, str]:
        paths = {}
        for name, (handle, temp) in self.files.items():
            handle.close()
            if name in absent:
                temp.unlink()
                continue
            final = self.folder / name  # type: ignore[operator]
            temp.replace(final)
            paths[name] = str(final)
        return paths

    def discard(self) -> None:
        for handle, temp in self.files.values():
            handle.close()
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _bytes_of(value: Any, is_item: bool) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        data = json.dumps(value, default=repr).encode("utf-8")
    return data + b"\n" if is_item else data


class _View:
    """The live table of steps (a terminal only) and the summary."""

    def __init__(self, steps: list[str], live: bool) -> None:
        self.state = {name: "waiting" for name in steps}
        self.runs = dict.fromkeys(steps, 0)
        self.items: dict[str, int] = {}
        self.live: Any = None
        if live:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self.table(), console=Console(stderr=True), transient=True)
            self.live.start()

    def table(self) -> Any:
        from rich.table import Table

        table = Table(title="machine run")
        for column in ("step", "state", "runs", "items"):
            table.add_column(column)
        for name, state in self.state.items():
            table.add_row(name, state, str(self.runs[name]), str(self.items.get(name, "")))
        return table

    def on(self, event: Any) -> None:
        from ..engine import ItemStarted, StepFinished, StepStarted

        if isinstance(event, StepStarted) and event.step in self.state:
            self.state[event.step] = "running"
        elif isinstance(event, StepFinished) and event.step in self.state:
            self.runs[event.step] += 1
            self.state[event.step] = "skipped" if event.outcome == "skipped" else "done"
        elif isinstance(event, ItemStarted):
            self.items[event.map] = self.items.get(event.map, 0) + 1
        if self.live is not None:
            self.live.update(self.table())

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


def _summary(result: Any) -> None:
    from rich.table import Table

    table = Table(title=f"machine run: {result.seconds:.2f} s")
    for column in ("step", "calls", "items", "skipped", "absent", "bytes in", "bytes out", "s"):
        table.add_column(column, justify="left" if column == "step" else "right")
    for name, report in result.steps.items():
        table.add_row(
            name,
            str(report.calls),
            str(report.items),
            str(report.skipped),
            str(report.absent),
            str(report.bytes_in),
            str(report.bytes_out),
            f"{report.seconds:.2f}",
        )
    console(stderr=True).print(table)


def _usage(
    file: Path, cartridges: list[str], inputs_text: list[str], output_dir: Path | None = None
) -> dict[str, Any]:
    """The parsed inputs, once the arguments are checked (before anything is started).

    :raises _Usage: a missing file or cartridge, a directory given as one, a malformed input,
        an output folder that is a file or cannot be written.
    """
    if not file.is_file():
        raise _Usage(f"no machine file at {file}")
    if not cartridges:
        raise _Usage("give at least one --cartridge")
    for path in cartridges:
        if Path(path).is_dir():
            raise _Usage(cartridge_problem(path))
        if not Path(path).exists():
            raise _Usage(f"no cartridge at {path}")
    problem = output_dir_problem(output_dir) if output_dir is not None else None
    if problem is not None:
        raise _Usage(problem)
    return _parse_inputs(inputs_text)


def _fail(as_json: bool, payload: dict[str, Any], line: str, code: int) -> int:
    if as_json:
        print(json.dumps({"ok": False, **payload}))
    print(line, file=sys.stderr)
    return code


async def _on_signal(caught: list[int], scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            caught.append(int(signum))
            scope.cancel()
            return


async def _run(
    file: Path,
    cartridges: list[str],
    inputs: dict[str, Any],
    output_dir: Path | None,
    as_json: bool,
) -> int:
    """The run, stopped by a signal: its temporary files removed, ``interrupted`` said."""
    caught: list[int] = []
    sinks: list[_Sinks] = []
    code = _FAILED
    failure: Exception | None = None
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_signal, caught, scope)
            try:
                code = await _run_machine(file, cartridges, inputs, output_dir, as_json, sinks)
            except Exception as exc:  # raised below as itself, not in an exception group
                failure = exc
            tg.cancel_scope.cancel()
    if failure is not None:
        for each in sinks:
            each.discard()
        raise failure
    if caught:
        for each in sinks:
            each.discard()
        print(f"interrupted ({signal.Signals(caught[0]).name})", file=sys.stderr)
        return 128 + caught[0]
    return code


async def _run_machine(
    file: Path,
    cartridges: list[str],
    inputs: dict[str, Any],
    output_dir: Path | None,
    as_json: bool,
    made: list[_Sinks],
) -> int:
    from ..engine import Engine, MachineInputError, MachineOutputData, MachineRunError, SpawnFailed
    from ..machine import MachineError

    err = sys.stderr

    def fail(payload: dict[str, Any], line: str, code: int) -> int:
        return _fail(as_json, payload, line, code)

    async with Engine() as engine:
        for path in cartridges:
            engine.add_cartridge(path)
        try:
            machine = await engine.machine(file)
        except MachineError as error:
            return fail(
                {
                    "kind": error.kind,
                    "message": error.message,
                    "line": error.line,
                    "column": error.column,
                },
                f"{error.kind}: {error}",
                _FAILED,
            )
        except SpawnFailed as error:
            return fail(
                {"code": error.code, "message": error.message},
                start_failure_line(error),
                _FAILED,
            )
        outputs = [node.label or node.name for node in machine.outputs]
        if output_dir is None and len(outputs) > 1 and not as_json:
            return fail(
                {"error": "usage"},
                f"error: the machine has {len(outputs)} outputs "
                f"({', '.join(outputs)}); give --output-dir",
                _USAGE,
            )
        try:
            run = engine.stream_machine(
                machine, inputs, keep_outputs=as_json and output_dir is None
            )
        except MachineInputError as error:
            return fail({"error": "usage", "node": error.node}, f"error: {error}", _USAGE)
        sinks = _Sinks(outputs, output_dir) if not (as_json and output_dir is None) else None
        if sinks is not None:
            made.append(sinks)
        # The live table redraws stderr: never while the data goes to the same terminal.
        data_on_terminal = output_dir is None and sys.stdout.isatty()
        live = err.isatty() and not as_json and not data_on_terminal
        view = _View(list(machine.step_names), live)
        try:
            async with run:
                async for event in run:
                    view.on(event)
                    if isinstance(event, MachineOutputData) and sinks is not None:
                        sinks.write(event.output, event.value, event.is_item)
        except MachineRunError as error:
            view.stop()
            if sinks is not None:
                sinks.discard()
            return fail(
                {
                    "code": error.code,
                    "attribution_class": error.attribution_class,
                    "message": error.message,
                    "step": error.step,
                    "item": error.item,
                    "arg_urn": error.arg_urn,
                },
                error.one_line(),
                _FAILED,
            )
        except BaseException:  # cancelled by a signal: the caller removes the files
            view.stop()
            raise
        view.stop()
        result = run.result
        paths = sinks.commit(result.absent) if sinks is not None else {}
    if as_json:
        report: dict[str, Any] = {}
        for name in outputs:
            if name in result.absent:
                continue
            entry: dict[str, Any] = {"path": paths[name]} if name in paths else {}
            out = result.outputs.get(name)
            if out is not None and not paths:
                if out.items:
                    entry["items"] = [_jsonable(i.value) for i in out.items]
                else:
                    entry["text"] = _jsonable(out.data)
            report[name] = entry
        steps = {
            n: {
                "calls": r.calls,
                "items": r.items,
                "skipped": r.skipped,
                "absent": r.absent,
                "bytes_in": r.bytes_in,
                "bytes_out": r.bytes_out,
            }
            for n, r in result.steps.items()
        }
        print(
            json.dumps(
                {"ok": True, "outputs": report, "absent": list(result.absent), "steps": steps}
            )
        )
    else:
        for name in result.absent:
            print(f"output {name}: absent (an optional output upstream did not fire)", file=err)
        if output_dir is None and sys.stdout.isatty() and sinks is not None:
            sys.stdout.write("\n")
        _summary(result)
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"bytes": len(value)}
    return value


@app.command("run")
def run_command(
    file: Path = typer.Argument(..., help="The machine notation file."),  # noqa: B008
    cartridge: list[str] = typer.Option(  # noqa: B008
        [], "--cartridge", "-c", help="A cartridge the machine's caps come from; repeat it."
    ),
    input_: list[str] = typer.Option(  # noqa: B008
        [], "--input", "-i", help="An input node: NAME=TEXT, or NAME=@PATH for a file."
    ),
    output_dir: Path | None = typer.Option(  # noqa: B008
        None, "--output-dir", "-o", help="Write each output to DIR/NAME (atomically)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object as the result."),
) -> None:
    """Run a machine across cartridges and write its outputs."""
    try:
        inputs = _usage(file, list(cartridge), list(input_), output_dir)
    except _Usage as error:
        raise typer.Exit(_fail(as_json, {"error": "usage"}, f"error: {error}", _USAGE)) from None
    try:
        code = anyio.run(_run, file, list(cartridge), inputs, output_dir, as_json)
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly, as a pipeline expects.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise typer.Exit(code)
