"""``cartridge run FILE --cartridge PATH ... --input NAME=VALUE|NAME=@PATH|NAME=@- ...``.

Runs a machine (its notation in FILE) on the cartridges given: every ``--input`` names an input
node of the machine as the text writes it. The outputs go to ``DIR/NAME`` (``--output-dir``),
any node to a file of its own (``--output NAME=FILE``, an inner node too), every inner node to
``--keep-intermediates DIR``; each file is written to a temporary name and renamed when the run
succeeded (nothing partial is left behind). A machine with one output and no other place for
it writes it to stdout. On a terminal a live table shows each step; at the end a summary table
goes to stderr. ``--json`` prints one JSON object instead.

Every run writes a run record (``cartridge runs``, ``cartridge log``) and stores its step calls
in the step cache; ``--cache DIR`` and ``--resume`` also look them up, so a run after a failure
calls only what did not finish (see ``docs/runs.md``). Exit status: 0 success, 1 a refused
machine, a failed step or ``--timeout``, 2 a usage error (nothing is started), 128 + N after
signal N (SIGINT, SIGTERM, SIGHUP: the temporary files are removed, stderr says
``interrupted``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import attrs
import typer

from ..engine import (
    CacheError,
    RunRecorder,
    default_runs_dir,
    read_events,
    read_run,
    step_totals,
)
from ..protocol import AttributionClass, ErrorCode, ErrorReport
from ._app import app
from ._lines import start_failure_line
from ._paths import cartridge_problem, output_dir_problem, output_file_problem
from ._planned import NoPlan, PlanRequest, plan_run, run_each, scratch_folder, show
from ._run_setup import Sinks, Usage, choose_cache, parse_inputs, parse_targets
from ._run_view import RunView, write_summary

_USAGE = 2
_FAILED = 1


@attrs.frozen(kw_only=True)
class _Options:
    """Everything ``cartridge run`` was asked, checked."""

    file: Path
    cartridges: tuple[str, ...]
    inputs: dict[str, Any]
    output_dir: Path | None
    targets: dict[str, Path]
    keep: Path | None
    as_json: bool
    cache: Path | None
    resume: bool
    no_cache: bool
    report: Path | None
    timeout: float | None
    verbose: bool
    log_dir: Path | None
    runs_dir: Path
    #: Folders of installed cartridges the machine's caps also come from (``run --to``).
    from_dirs: tuple[Path, ...] = ()
    #: What the run record names as the source (default: the machine file).
    source: str | None = None
    #: More the run record keeps (a planned run's input and target).
    extra: dict[str, Any] = attrs.field(factory=dict)


def _check(
    file: Path,
    cartridges: list[str],
    timeout: float | None,
    output_dir: Path | None,
    targets: dict[str, Path],
    from_dirs: tuple[Path, ...] = (),
) -> None:
    """:raises Usage: a missing file or cartridge, a directory given as one, a timeout that
    is not positive, an output folder or file that cannot be written."""
    if not file.is_file():
        raise Usage(f"no machine file at {file}")
    if not cartridges and not from_dirs:
        raise Usage("give at least one --cartridge")
    for path in cartridges:
        problem = cartridge_problem(path)
        if problem is not None:
            raise Usage(problem)
    if timeout is not None and not timeout > 0:
        raise Usage("--timeout must be a positive number of seconds")
    problems = [output_dir_problem(output_dir)] if output_dir is not None else []
    problems += [output_file_problem(path) for path in targets.values()]
    for problem in problems:
        if problem is not None:
            raise Usage(problem)


def _fail(as_json: bool, payload: dict[str, Any], line: str, code: int) -> int:
    if as_json:
        print(json.dumps({"ok": False, **payload}))
    print(line, file=sys.stderr)
    return code


def _places(
    opts: _Options, outputs: list[str], names: list[str], inputs: list[str]
) -> tuple[dict[str, Path], str | None]:
    """Where each value goes: files by node name, and the one value for stdout (or None).

    :raises Usage: ``--output`` names no node.
    """
    for name in opts.targets:
        if name not in names:
            raise Usage(f"--output {name}: the machine has no such node (its nodes: "
                        f"{', '.join(names)})")  # fmt: skip
    files = dict(opts.targets)
    if opts.output_dir is not None:
        for name in outputs:
            files.setdefault(name, opts.output_dir / name)
    if opts.keep is not None:
        for name in names:
            if name not in outputs and name not in inputs:
                files.setdefault(name, opts.keep / name)
    stdout = None
    if opts.output_dir is None and not opts.as_json and len(outputs) == 1:
        stdout = outputs[0] if outputs[0] not in files else None
    return files, stdout


def _stderr_tails(engine: Any) -> None:
    for status in engine.status():
        if status.stderr_tail:
            print(f"--- {status.name} stderr (last lines) ---", file=sys.stderr)
            print(status.stderr_tail.rstrip("\n"), file=sys.stderr)
        if status.log_path:
            print(f"--- {status.name} log: {status.log_path}", file=sys.stderr)


class _Held:
    """What the command needs after ``anyio.run`` returns or is interrupted."""

    recorder: RunRecorder | None = None
    sinks: Sinks | None = None
    signal: int | None = None


async def _on_signal(held: _Held, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            held.signal = int(signum)
            scope.cancel()
            return


async def _run_until_signal(opts: _Options, held: _Held) -> int:
    """The run, cancelled by SIGINT, SIGTERM or SIGHUP (``held.signal`` says which)."""
    code = _FAILED
    failure: Exception | None = None
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_signal, held, scope)
            try:
                code = await _run(opts, held)
            except Exception as exc:  # raised below as itself, not in an exception group
                failure = exc
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return code


def _interrupted(held: _Held, signum: int) -> int:
    """Remove the temporary outputs, close the record, say so: ``128 + signum``."""
    if held.sinks is not None:
        held.sinks.discard()
    name = signal.Signals(signum).name
    recorder = held.recorder
    if recorder is not None:
        recorder.end(KeyboardInterrupt())
        finished = sum(t["runs"] for t in step_totals(read_events(recorder.folder)).values())
        if finished:
            calls = f"{finished} step call{'s' if finished != 1 else ''}"
            reuse = f"`cartridge run --resume ...` reuses the {calls} it finished"
        else:
            reuse = "no step had finished, so there is nothing for `--resume` to reuse"
        print(f"interrupted: run {recorder.run_id} stopped by {name}; {reuse}", file=sys.stderr)
    else:
        print(f"interrupted by {name}", file=sys.stderr)
    return 128 + signum


async def _run(opts: _Options, held: _Held) -> int:
    from ..engine import Engine, MachineInputError, MachineOutputData, MachineRunError, SpawnFailed
    from ..machine import MachineError

    err = sys.stderr
    as_json = opts.as_json

    def fail(payload: dict[str, Any], line: str, code: int) -> int:
        return _fail(as_json, payload, line, code)

    text = opts.file.read_text(encoding="utf-8")
    try:
        store = choose_cache(text, opts.runs_dir, opts.cache, opts.resume, opts.no_cache)
    except Usage as error:
        return fail({"error": "usage"}, f"error: {error}", _USAGE)
    except CacheError as error:
        return fail({"error": "usage"}, f"error: {error}", _USAGE)
    async with Engine(log_dir=opts.log_dir) as engine:
        for path in opts.cartridges:
            engine.add_cartridge(path)
        for folder in opts.from_dirs:
            await engine.discover(folder)
        try:
            machine = await engine.machine(opts.file)
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
            line = start_failure_line(error)
            return fail({"code": error.code, "message": error.message}, line, _FAILED)
        outputs = [node.label or node.name for node in machine.outputs]
        names = [node.label or node.name for node in machine.nodes]
        try:
            files, stdout = _places(
                opts, outputs, names, [n.label or n.name for n in machine.inputs]
            )
        except Usage as error:
            return fail({"error": "usage"}, f"error: {error}", _USAGE)
        if stdout is None and not files and len(outputs) > 1 and not as_json:
            return fail(
                {"error": "usage"},
                f"error: the machine has {len(outputs)} outputs "
                f"({', '.join(outputs)}); give --output-dir",
                _USAGE,
            )
        taps: list[str] | str = "all" if opts.keep is not None else list(opts.targets)
        recorder = RunRecorder(
            opts.runs_dir,
            engine=engine,
            text=text,
            source=opts.source or str(opts.file),
            extra={"cache": str(store.root) if store is not None else None,
                   "cache_lookup": bool(store is not None and store.lookup_enabled),
                   **opts.extra},
        )  # fmt: skip
        held.recorder = recorder
        keep_outputs = as_json and not files
        try:
            run = engine.stream_machine(
                machine,
                opts.inputs,
                keep_outputs=keep_outputs,
                cache=store,
                outputs=taps,
                record=recorder,
            )
        except MachineInputError as error:
            return fail({"error": "usage", "node": error.node}, f"error: {error}", _USAGE)
        sinks = Sinks(files, stdout) if not keep_outputs else None
        held.sinks = sinks
        # The live table redraws stderr: never while the data goes to the same terminal.
        data_on_terminal = stdout is not None and sys.stdout.isatty()
        live = err.isatty() and not as_json and not data_on_terminal
        view = RunView([s.label or s.alias for s in machine.steps], live)
        try:
            with anyio.fail_after(opts.timeout):
                async with run:
                    async for event in run:
                        view.on(event)
                        if isinstance(event, MachineOutputData) and sinks is not None:
                            sinks.write(event.output, event.value, event.is_item)
        except MachineRunError as error:
            view.stop()
            if sinks is not None:
                sinks.discard()
            if opts.verbose:
                _stderr_tails(engine)
            _write_report(opts, recorder)
            return fail(
                {
                    "code": error.code,
                    "attribution_class": error.attribution_class,
                    "message": error.message,
                    "step": error.step,
                    "item": error.item,
                    "arg_urn": error.arg_urn,
                    "run": recorder.run_id,
                },
                error.one_line(),
                _FAILED,
            )
        except Usage as error:  # binary data for a terminal
            view.stop()
            if sinks is not None:
                sinks.discard()
            recorder.amend(status="failed", error={"code": error.code,
                           "class": error.attribution_class, "message": str(error)})  # fmt: skip
            return fail({"error": "usage"}, f"error: {error}", _USAGE)
        except TimeoutError:
            view.stop()
            if sinks is not None:
                sinks.discard()
            timeout = ErrorReport(
                code=ErrorCode.TIMEOUT,
                attribution_class=AttributionClass.RESOURCE,
                message=f"the run did not end within {opts.timeout:g} s (--timeout)",
            )
            line = timeout.one_line()
            recorder.amend(status="failed", error={"code": timeout.code,
                           "class": timeout.attribution_class, "message": line})  # fmt: skip
            if opts.verbose:
                _stderr_tails(engine)
            _write_report(opts, recorder)
            return fail({"code": timeout.code, "message": line, "run": recorder.run_id}, line,
                        _FAILED)  # fmt: skip
        view.stop()
        result = run.result
        paths = sinks.commit(result.absent) if sinks is not None else {}
        if sinks is not None:
            recorder.amend(outputs=_written(sinks, paths, stdout))
    _write_report(opts, recorder)
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
                "cache_hits": r.cache_hits,
                "cache_misses": r.cache_misses,
            }
            for n, r in result.steps.items()
        }
        print(
            json.dumps(
                {
                    "ok": True,
                    "outputs": report,
                    "absent": list(result.absent),
                    "steps": steps,
                    "run": recorder.run_id,
                }
            )
        )
    else:
        for name in result.absent:
            print(f"output {name}: absent (an optional output upstream did not fire)", file=err)
        if stdout is not None and sys.stdout.isatty():
            sys.stdout.write("\n")
        write_summary(result)
    return 0


def _written(sinks: Sinks, paths: dict[str, str], stdout: str | None) -> dict[str, Any]:
    """Where each output went and its size, for the record (and its report)."""
    places: dict[str, Any] = {
        name: {"path": str(Path(path).resolve()), "bytes": sinks.written.get(name, 0)}
        for name, path in paths.items()
    }
    if stdout is not None:
        places[stdout] = {"path": "standard output", "bytes": sinks.written.get(stdout, 0)}
    return places


def _write_report(opts: _Options, recorder: RunRecorder) -> None:
    if opts.report is None:
        return
    from .runs_cmd import write_report

    try:
        write_report(read_run(recorder.folder), opts.report)
    except OSError as error:
        print(f"error: --report {opts.report}: {error.strerror or error}", file=sys.stderr)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"bytes": len(value)}
    return value


@app.command("run")
def run_command(
    args: list[str] = typer.Argument(  # noqa: B008
        ..., metavar="FILE | INPUT...", help="The machine notation file; with --to, the input."
    ),
    to: str | None = typer.Option(
        None, "--to", help="Plan the machine: the media URN wanted from the INPUT."
    ),
    pick: int = typer.Option(1, "--pick", help="With --to: run plan N (1 is the best)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="With --to: print the chosen machine, run nothing."
    ),
    arg: list[str] = typer.Option(  # noqa: B008
        [], "--arg", help="With --to: bind a side argument of the plan, NAME=VALUE; repeat it."
    ),
    media: str | None = typer.Option(
        None, "--media", help="With --to: the INPUT's media URN (wins over detection)."
    ),
    from_dir: list[Path] = typer.Option(  # noqa: B008
        [], "--from-dir", help="With --to: plan over the cartridges installed here; repeat it."
    ),
    refresh: bool = typer.Option(
        False, "--refresh", help="With --to: start every discovered cartridge again."
    ),
    cartridge: list[str] = typer.Option(  # noqa: B008
        [], "--cartridge", "-c", help="A cartridge the machine's caps come from; repeat it."
    ),
    input_: list[str] = typer.Option(  # noqa: B008
        [], "--input", "-i", help="An input node: NAME=TEXT, NAME=@PATH, or NAME=@- for stdin."
    ),
    output_dir: Path | None = typer.Option(  # noqa: B008
        None, "--output-dir", "-o", help="Write each output to DIR/NAME (atomically)."
    ),
    output: list[str] = typer.Option(  # noqa: B008
        [], "--output", help="Write any node (an inner one too) to a file: NAME=FILE; repeat it."
    ),
    keep_intermediates: Path | None = typer.Option(  # noqa: B008
        None, "--keep-intermediates", help="Write every node that is not an output to DIR/NAME."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object as the result."),
    cache: Path | None = typer.Option(  # noqa: B008
        None, "--cache", help="A step cache folder: look each step call up, store it after."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Use the step cache of the last run of this machine."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither look up nor store steps."),
    report: Path | None = typer.Option(  # noqa: B008
        None, "--report", help="Write the run's HTML report to this file."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds for the whole run; then it is cancelled."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="On failure, show the cartridges' stderr."
    ),
    log_dir: Path | None = typer.Option(  # noqa: B008
        None, "--log-dir", help="Keep each cartridge's stderr log in this folder."
    ),
    runs_dir: Path | None = typer.Option(  # noqa: B008
        None, "--runs-dir", help="Where run records go (default: $CARTRIDGE_HOME/runs)."
    ),
) -> None:
    """Run a machine across cartridges and write its outputs (with --to, a planned one)."""
    scratch: Path | None = None
    try:
        if to is None:
            if len(args) != 1:
                raise Usage("give one machine FILE (or --to MEDIA and the INPUT to plan from)")
            for name, given in (("--arg", arg), ("--media", media), ("--from-dir", from_dir)):
                if given:
                    raise Usage(f"{name} goes with --to (a machine file binds its own values)")
            file = Path(args[0])
            planned = None
        else:
            scratch = scratch_folder()
            request = PlanRequest(
                inputs=tuple(args),
                target=to,
                cartridges=tuple(cartridge),
                from_dirs=tuple(from_dir),
                media=media,
                arguments=tuple(arg),
                pick=pick,
                refresh=refresh,
            )
            planned = plan_run(request, scratch)
            show(planned)
            if dry_run:
                print(planned.text)
                raise typer.Exit(0)
            if len(planned.files) > 1 and output_dir is None and not as_json:
                raise Usage(
                    f"{len(planned.files)} inputs: give --output-dir DIR (each output is "
                    "named after its input)"
                )
            file = planned.write(scratch)
        targets = parse_targets(list(output))
        _check(file, list(cartridge), timeout, output_dir, targets, tuple(from_dir))
        opts = _Options(
            file=file,
            cartridges=tuple(cartridge),
            inputs=parse_inputs(list(input_)),
            output_dir=output_dir,
            targets=targets,
            keep=keep_intermediates,
            as_json=as_json,
            cache=cache,
            resume=resume,
            no_cache=no_cache,
            report=report,
            timeout=timeout,
            verbose=verbose,
            log_dir=log_dir,
            runs_dir=runs_dir or default_runs_dir(),
            from_dirs=tuple(from_dir),
        )
        code = _run_checked(opts) if planned is None else run_each(opts, planned, _run_checked)
    except Usage as error:
        code = _fail(as_json, {"error": "usage"}, f"error: {error}", _USAGE)
    except NoPlan as error:
        code = _fail(as_json, {"error": "no plan"}, str(error), _FAILED)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    raise typer.Exit(code)


def _run_checked(opts: _Options) -> int:
    """The run of checked options, with its signals and a reader that goes away."""
    held = _Held()
    try:
        code = anyio.run(_run_until_signal, opts, held)
        if held.signal is not None:
            code = _interrupted(held, held.signal)
    except KeyboardInterrupt:
        held.signal = signal.SIGINT
        code = _interrupted(held, signal.SIGINT)
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly, as a pipeline expects.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    if held.signal is not None and held.recorder is not None:
        _write_report(opts, held.recorder)
    return code
