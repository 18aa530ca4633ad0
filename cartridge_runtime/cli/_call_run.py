"""What ``cartridge call`` does once its options are read: the checks made before anything
is spawned, the engine, the call, its outputs and its exit status (see :mod:`.call` for the
command and its options).

Kept free of typer: a plain ``cartridge call TARGET CAP`` (no option, no cap flag) is parsed
here (:func:`quick_call`) and costs no command-line framework; anything else goes to typer,
whose help and messages stay the command's own.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
import attrs

from ..protocol import NetworkPolicy
from ._call_inputs import _NAME, UsageError, check_before_spawn, plan_call_inputs
from ._call_outputs import Renderer, StdoutClosed, absent_outputs, plan_outputs, result_json
from ._early import EarlyProcess
from ._lines import error_line, start_failure_line
from ._paths import output_dir_problem, output_file_problem

__all__ = ("CallOptions", "quick_call", "run_call", "run_checked")

EXIT_OK: Final = 0
EXIT_CALL_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_STDOUT_CLOSED: Final = 141  #: as a shell reports a writer stopped by SIGPIPE
#: How many near misses a NO_HANDLER or unknown-alias error lists.
CLOSEST: Final = 3


@attrs.frozen(kw_only=True)
class CallOptions:
    """Everything ``cartridge call`` was given (values are never printed: ``repr`` hides them)."""

    target: str
    cap: str
    args: tuple[str, ...] = attrs.field(repr=False)
    tokens: tuple[str, ...] = attrs.field(repr=False)
    outputs: tuple[str, ...] = ()
    output_dir: Path | None = None
    cartridges: tuple[str, ...] = ()
    timeout: float | None = None
    policy: NetworkPolicy = NetworkPolicy.OFFLINE
    verbose: bool = False
    log_dir: Path | None = None
    as_json: bool = False


def _err(text: str) -> None:
    sys.stderr.write(" ".join(text.splitlines()) + "\n")
    sys.stderr.flush()


def _closest(wanted: str, known: list[str]) -> str:
    import difflib  # only for a mistake: not paid by a call that goes well

    near = difflib.get_close_matches(wanted, known, n=CLOSEST, cutoff=0.3)
    return ", ".join(near)


async def _show_stderr(engine: Any, name: str, exc: Any, opts: CallOptions) -> None:
    """After a failure: the cartridge's stderr (``-v``) and where its log is kept."""
    if not opts.verbose and opts.log_dir is None:
        return
    tail = getattr(exc, "stderr_tail", "") or ""
    status = next((s for s in engine.status() if s.name == name), None)
    if not tail and opts.verbose:
        with anyio.move_on_after(5):
            await engine.stop(name)  # its stderr is complete once it exited
        status = next((s for s in engine.status() if s.name == name), None)
        tail = status.stderr_tail if status is not None else ""
    if opts.verbose:
        if tail.strip():
            sys.stderr.write(f"stderr of cartridge {name}:\n{tail.rstrip()}\n")
        else:
            sys.stderr.write(f"cartridge {name} wrote nothing to stderr\n")
    if opts.log_dir is not None and status is not None and status.log_path:
        sys.stderr.write(f"stderr log of cartridge {name}: {status.log_path}\n")
    sys.stderr.flush()


async def _call(engine: Any, name: str, opts: CallOptions) -> int:
    from ..engine import CallError, NoRoute, OutputData, OutputItem, OutputStarted
    from ..engine import Log as LogEvent
    from ..engine import Progress as ProgressEvent
    from ..runtime._cli._args import StdinReader

    try:
        await engine.start(name)
    except CallError as exc:
        _err(start_failure_line(exc))
        tail = getattr(exc, "stderr_tail", "")
        if tail and opts.verbose:
            sys.stderr.write(f"stderr of cartridge {name}:\n{tail.rstrip()}\n")
        return EXIT_CALL_FAILED
    # What the start made (modules, classes, the engine and the cartridge's connection) lives
    # as long as the command: the collector need not look at it again, nor at the exit.
    gc.freeze()
    gc.enable()
    manifest = engine.manifest(name)
    cap_def = _dispatched(manifest, opts.cap)
    if cap_def is None and not opts.cap.startswith("cap:"):
        aliases = sorted(a for c in manifest.iter_caps() for a in c.aliases) if manifest else []
        near = _closest(opts.cap, aliases)
        hint = f"; did you mean {near}?" if near else ""
        raise UsageError(
            f"unknown cap or alias {opts.cap!r}{hint} (available: {', '.join(aliases)})"
        )
    cap_urn = cap_def.urn if cap_def is not None else opts.cap
    plan = plan_outputs(cap_def, list(opts.outputs), opts.output_dir)
    stdin = getattr(sys.stdin, "buffer", None)
    # Reading stdin may block; a signal or --timeout abandons the thread instead of waiting.
    runs = await anyio.to_thread.run_sync(
        plan_call_inputs,
        cap_def,
        list(opts.args),
        list(opts.tokens),
        StdinReader(stdin),
        abandon_on_cancel=True,
    )
    out = sys.stdout.buffer
    _grow_pipe(out)
    renderer = Renderer(
        plan,
        out,
        sys.stderr,
        out_tty=_isatty(out),
        err_tty=_isatty(sys.stderr),
        label=cap_def.aliases[0] if cap_def is not None and cap_def.aliases else opts.cap,
    )
    if opts.as_json:
        return await _call_json(engine, name, cap_urn, cap_def, runs, opts)
    started: set[str | None] = set()
    try:
        for inputs in runs:
            async with engine.call(cap_urn, inputs) as response:
                async for ev in response:
                    if isinstance(ev, OutputData):  # by far the most frequent: tested first
                        renderer.data(ev.output, ev.value, item=False)
                    elif isinstance(ev, OutputItem):
                        renderer.data(ev.output, ev.value, item=True)
                    elif isinstance(ev, OutputStarted):
                        started.add(ev.output)
                    elif isinstance(ev, ProgressEvent):
                        renderer.progress(ev.progress, ev.message)
                    elif isinstance(ev, LogEvent):
                        renderer.log(ev.level, ev.message, ev.attribution_class, ev.arg_urn)
                message = (response.end_meta or {}).get("message")
            if message:
                renderer.stop_bar()
                renderer.status(f"[END] {message}")
    except CallError as exc:
        plan.discard()
        renderer.finish()
        line = start_failure_line(exc)
        if isinstance(exc, NoRoute):
            known = [c.urn for n in _names(engine) for c in _caps(engine, n)]
            near = _closest(_canonical(opts.cap), known)
            line += f"; closest: {near}" if near else ""
        _err(line)
        await _show_stderr(engine, name, exc, opts)
        return EXIT_CALL_FAILED
    except StdoutClosed:
        plan.discard()
        _silence_stdout()
        return EXIT_STDOUT_CLOSED
    except BaseException:
        plan.discard()
        renderer.stop_bar()
        raise
    renderer.finish()
    for absent in absent_outputs(cap_def, started):
        _err(f"output {absent}: absent (optional, it did not fire)")
    for path in plan.commit():
        if opts.verbose:
            _err(f"wrote {path}")
    return EXIT_OK


async def _call_json(
    engine: Any, name: str, cap_urn: str, cap_def: Any, runs: list[Any], opts: CallOptions
) -> int:
    """``--json``: each call's whole result as one line of JSON on stdout (every output with
    its items and their meta); a failure as ``{"ok": false, ...}`` and its error line."""
    from ..engine import CallError

    for inputs in runs:
        try:
            result = await engine.call(cap_urn, inputs)
        except CallError as exc:
            report = {
                "ok": False,
                "code": exc.code,
                "attribution_class": exc.attribution_class,
                "message": exc.message,
                "arg_urn": exc.arg_urn,
            }
            print(json.dumps(report, ensure_ascii=False), flush=True)
            _err(start_failure_line(exc))
            await _show_stderr(engine, name, exc, opts)
            return EXIT_CALL_FAILED
        print(json.dumps(result_json(cap_def, result), ensure_ascii=False), flush=True)
    return EXIT_OK


def _check_output_paths(opts: CallOptions) -> None:
    """``--output`` and ``--output-dir`` name places a file can be written (a ``NAME=FILE``
    is told from a file name by its identifier; ``./FILE`` writes a name holding ``=``).

    :raises UsageError: the first that cannot.
    """
    problems = [output_dir_problem(opts.output_dir)] if opts.output_dir is not None else []
    for spec in opts.outputs:
        name, eq, rest = spec.partition("=")
        named = eq and (_NAME.fullmatch(name) or name.startswith("media:"))
        problems.append(output_file_problem(Path(rest if named else spec)))
    problem = next((p for p in problems if p is not None), None)
    if problem is not None:
        raise UsageError(problem)


def _dispatched(manifest: Any, cap: str) -> Any:
    """The cap definition a call to ``cap`` reaches in ``manifest``: by alias or exact text,
    else the one the cartridge's own dispatch picks for a cap URN (partial, reordered), so
    every spelling takes the same flags, ``--arg NAME=`` and stdin (``None``: none)."""
    if manifest is None:
        return None
    found = manifest.find_cap(cap)
    if found is not None or not cap.startswith("cap:"):
        return found
    from ..urn import select_handler

    caps = list(manifest.iter_caps())
    index = select_handler([c.urn for c in caps], cap)
    return caps[index] if index is not None else None


def _canonical(cap: str) -> str:
    """A cap URN in canonical form (tags sorted, as manifests hold them), for comparing."""
    from ..urn import CapUrn, UrnError

    try:
        return str(CapUrn.parse(cap))
    except UrnError:
        return cap


def _names(engine: Any) -> list[str]:
    return [s.name for s in engine.status()]


def _caps(engine: Any, name: str) -> list[Any]:
    manifest = engine.manifest(name)
    return list(manifest.iter_caps()) if manifest is not None else []


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _grow_pipe(stream: Any) -> None:
    """Enlarge ``stream``'s pipe as the engine's own (a chunk then goes in one write, instead
    of four turns of a 64 KiB pipe with its reader); anything but a pipe is left as it is."""
    from .._plumbing import grow_pipe

    with contextlib.suppress(AttributeError, OSError, ValueError):
        fd = stream.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            grow_pipe(fd)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush of a closed pipe is silent."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    if seconds is None:
        yield
    else:
        with anyio.fail_after(seconds):
            yield


async def _watch_signals(engine: Any, outcome: dict[str, int], scope: anyio.CancelScope) -> None:
    """SIGTERM, SIGINT, SIGHUP: kill every cartridge at once, then end with 128 + N."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            for name in _names(engine):
                with contextlib.suppress(Exception):
                    engine.kill(name)
            outcome["status"] = 128 + int(signum)
            scope.cancel()
            return


async def run_call(opts: CallOptions, early: EarlyProcess | None = None) -> int:
    """Run one ``cartridge call`` and return its exit status; ``early``: the cartridge's
    process, started before the command's imports (:mod:`._early`), for the engine to take."""
    from ..engine import CallTimeout, Engine

    # The engine also logs a cartridge's death (with its stderr tail) as a warning; here the
    # error line says it once, and -v shows the stderr.
    engine_log = logging.getLogger("cartridge_runtime.engine")
    if not engine_log.handlers:
        engine_log.addHandler(logging.NullHandler())
    outcome: dict[str, int] = {}
    async with Engine(policy=opts.policy, log_dir=opts.log_dir) as engine:
        if early is None:
            name = engine.add_cartridge(opts.target)
        else:
            from ._early_placement import EarlyPlacement

            name = engine.add_cartridge(opts.target, placement=EarlyPlacement(early))
        for more in opts.cartridges:
            engine.add_cartridge(more)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, engine, outcome, tg.cancel_scope)
            try:
                with _deadline(opts.timeout):
                    outcome.setdefault("status", await _call(engine, name, opts))
            except UsageError as exc:
                outcome.setdefault("status", EXIT_USAGE)
                _err(f"error: {exc}")
            except TimeoutError:
                for each in _names(engine):
                    with contextlib.suppress(Exception):
                        engine.kill(each)
                outcome.setdefault("status", EXIT_CALL_FAILED)
                late = CallTimeout(f"no result within {opts.timeout:g} s (--timeout)")
                _err(error_line(late.report))
            tg.cancel_scope.cancel()
    return outcome.get("status", EXIT_CALL_FAILED)


def run_checked(opts: CallOptions, early: EarlyProcess | None = None) -> int:
    """Check what was given (before anything else is spawned, when it can be), then run the
    call; returns the exit status (``EXIT_USAGE`` and one line on stderr for a usage error).
    ``early``: the cartridge, started already, for the engine to take (its caller discards
    it afterwards, taken or not)."""
    if opts.timeout is not None and not opts.timeout > 0:
        _err("error: --timeout must be a positive number of seconds")
        return EXIT_USAGE
    if opts.as_json and (opts.outputs or opts.output_dir is not None):
        _err("error: --json prints every output; it does not take --output or --output-dir")
        return EXIT_USAGE
    try:
        check_before_spawn(opts.target, opts.cap, list(opts.args))
        for more in opts.cartridges:
            check_before_spawn(more, "", [])
        _check_output_paths(opts)
    except UsageError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    return anyio.run(run_call, opts, early)


def quick_call(args: Sequence[str], early: EarlyProcess | None = None) -> int | None:
    """``cartridge call TARGET CAP`` run without typer: the exit status, or ``None`` when
    ``args`` are anything else (an option, a cap flag, a missing CAP), for typer to parse.
    ``early``: TARGET's process, started already (:func:`._early.spawn_for_call`)."""
    if len(args) != 2 or any(not arg or arg.startswith("-") for arg in args):
        return None
    target, cap = args
    return run_checked(CallOptions(target=target, cap=cap, args=(), tokens=()), early)
