"""CLI mode: a cartridge script run with arguments is a command-line tool (CLI-1).

======================================  ===========================================  ======
invocation                              effect                                       exit
======================================  ===========================================  ======
``script.py manifest``                  the manifest JSON (indent 2; the same        0
                                        object HELLO carries) on stdout
``script.py --help`` / ``-h``           the caps by alias with their arguments,      0
                                        on stderr (CLI-3, as the reference)
``script.py --version`` / ``-v``        ``name version`` on stdout                   0
``script.py ALIAS --help``              the cap's title, description, every          0
(or ``--help ALIAS``)                   argument and output, on stderr (CLI-4)
``script.py ALIAS [args]``              runs the handler under policy ``full``;      0
                                        main output on stdout
handler failed                          exactly one stderr line, a JSON object       1
                                        ``{"error", "code", "attribution_class"}``
                                        (plus ``arg_urn``), no traceback (CLI-6)
usage error                             unknown alias (the available ones are        2
                                        listed), missing required argument (named),
                                        unknown option, stray positional
======================================  ===========================================  ======

Output (CLI-12, CLI-13): the main output goes to stdout. Each bytes or text value emitted is
written followed by a newline, as the reference does; ``write()`` bytes are written as they
are (no added newline), so a streamed echo stays byte-exact; each sequence item is written on
its own line; any other value (``emit_cbor`` of a number, list, map...) is written as one line
of JSON. Outputs other than the main one are not printed. Progress and logs go to stderr as
``[PROGRESS 25%] message`` and ``[INFO internal] message`` (``[INFO input arg=<urn>] message``
when the log names an argument).

Standard input is streamed into the handler with bounded buffering (a few blocks), so a
streaming handler such as an echo runs in constant memory at any input size.

Argument mapping lives in :mod:`._cli_args`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final, TextIO

import anyio
import anyio.to_thread

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import AttributionClass, ErrorCode

from .._errors import CartridgeError
from .._input import InputStream, StreamFeed
from .._input_package import InputPackage
from .._output import OutputSpec
from ._args import (
    HELP_FLAGS,
    CliInput,
    CliUsageError,
    StdinReader,
    cap_help,
    plan_invocations,
    program_help,
)

__all__ = ("run_cli", "EXIT_CLI_OK", "EXIT_CLI_FAILED", "EXIT_CLI_USAGE", "EXIT_CLI_INTERRUPTED")

EXIT_CLI_OK: Final = 0  #: the handler succeeded (or help / manifest was printed)
EXIT_CLI_FAILED: Final = 1  #: the handler failed; one JSON line on stderr (CLI-6)
EXIT_CLI_USAGE: Final = 2  #: the command line does not match the manifest
EXIT_CLI_INTERRUPTED: Final = 130  #: interrupted (Ctrl-C), as shells report SIGINT

#: Stdin blocks read ahead of the handler; bounds CLI memory for streamed input.
STDIN_READ_AHEAD: Final = 4
MANIFEST_COMMAND: Final = "manifest"
VERSION_FLAGS: Final = frozenset({"--version", "-v"})


def run_cli(
    runtime: Any,
    argv: Sequence[str],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: TextIO | None = None,
    prog: str | None = None,
) -> int:
    """Run ``runtime`` as a command-line tool and return the exit status.

    :param runtime: a :class:`~cartridge_runtime.runtime.CartridgeRuntime`.
    :param argv: the arguments after the program name (``sys.argv[1:]``); must not be empty.
    :param stdin: binary standard input (default ``sys.stdin.buffer``).
    :param stdout: binary standard output (default ``sys.stdout.buffer``).
    :param stderr: text standard error (default ``sys.stderr``).
    :param prog: the program name shown in help (default: the script's file name).
    """
    out = stdout if stdout is not None else sys.stdout.buffer
    err = stderr if stderr is not None else sys.stderr
    inp = stdin if stdin is not None else _default_stdin()
    name = prog or Path(sys.argv[0] or runtime.manifest.name).name
    try:
        return _dispatch(runtime, list(argv), inp, out, err, name)
    except CliUsageError as exc:
        _line(err, f"{name}: {exc.message}")
        return EXIT_CLI_USAGE
    except KeyboardInterrupt:
        _line(err, "INTERRUPTED (user): interrupted")
        return EXIT_CLI_INTERRUPTED
    finally:
        with contextlib.suppress(BrokenPipeError, OSError):
            out.flush()


def _default_stdin() -> BinaryIO | None:
    """``sys.stdin.buffer``, or ``None`` when stdin was replaced by a text-only object."""
    return getattr(sys.stdin, "buffer", None)


def _line(err: TextIO, text: str) -> None:
    """One line on stderr: embedded line breaks are folded so a line stays one line."""
    err.write(" ".join(text.splitlines()) + "\n")
    err.flush()


def _text(err: TextIO, text: str) -> None:
    """Help text on stderr, flushed (it may be followed by nothing else)."""
    err.write(text)
    err.flush()


def _find_alias(manifest: Manifest, alias: str) -> CapDef | None:
    for cap in manifest.all_caps():
        if alias in cap.aliases:
            return cap
    return None


def _dispatch(
    runtime: Any, argv: list[str], stdin: BinaryIO | None, out: BinaryIO, err: TextIO, prog: str
) -> int:
    manifest = runtime.manifest
    if not argv:
        raise CliUsageError(f"no command given; run '{prog} --help' to list the commands")
    first, rest = argv[0], argv[1:]
    if first in HELP_FLAGS and not rest:
        _text(err, program_help(manifest, prog))
        return EXIT_CLI_OK
    if first in HELP_FLAGS and len(rest) == 1:  # ``--help ALIAS`` reads like ``ALIAS --help``
        first, rest = rest[0], [first]
    if first in VERSION_FLAGS and not rest:
        out.write(f"{manifest.name} {manifest.version}\n".encode())
        return EXIT_CLI_OK
    if first == MANIFEST_COMMAND:
        if rest:
            raise CliUsageError(f"'{MANIFEST_COMMAND}' takes no arguments (got {len(rest)})")
        out.write((manifest.to_pretty_json() + "\n").encode("utf-8"))
        return EXIT_CLI_OK
    cap = _find_alias(manifest, first)
    if cap is None:
        aliases = ", ".join(c.aliases[0] for c in manifest.all_caps())
        raise CliUsageError(
            f"unknown command {first!r}; available: {MANIFEST_COMMAND}, {aliases} "
            f"(run '{prog} --help' for details)"
        )
    options = rest[: rest.index("--")] if "--" in rest else rest
    if any(token in HELP_FLAGS for token in options):
        _text(err, cap_help(cap, prog))
        return EXIT_CLI_OK
    runs = plan_invocations(cap, rest, StdinReader(stdin))
    for inputs in runs:
        status = _run_once(runtime, cap, inputs, out, err)
        if status != EXIT_CLI_OK:
            return status
    return EXIT_CLI_OK


def _run_once(runtime: Any, cap: CapDef, inputs: list[CliInput], out: BinaryIO, err: TextIO) -> int:
    sink = _TerminalSink(out, err)
    try:
        anyio.run(_invoke_cli, runtime, cap.urn, inputs, sink)
    except CartridgeError as exc:
        sink.end_line()
        report = {
            "error": exc.message,
            "code": exc.code,
            "attribution_class": exc.attribution_class,
        }
        if exc.arg_urn:
            report["arg_urn"] = exc.arg_urn
        _line(err, json.dumps(report, ensure_ascii=False))
        return EXIT_CLI_FAILED
    except BrokenPipeError:
        return EXIT_CLI_FAILED  # the reader went away (``| head``); nothing more to say
    sink.end_line()
    return EXIT_CLI_OK


# -- the handler run ------------------------------------------------------------------------


async def _invoke_cli(
    runtime: Any, cap_urn: str, inputs: list[CliInput], sink: _TerminalSink
) -> None:
    """Run the handler with streamed inputs (stdin is read in a worker thread, a few blocks
    ahead of the handler), then stop any reader the handler left unread."""
    streams: list[InputStream] = []
    feeders: list[tuple[StreamFeed, StdinReader, anyio.Semaphore]] = []
    for index, cli_input in enumerate(inputs):
        stream_id = f"arg-{index}"
        if cli_input.reader is not None:
            slots = anyio.Semaphore(STDIN_READ_AHEAD)
            stream = InputStream(stream_id, cli_input.media_urn, consumed=_releaser(slots))
            feeders.append((StreamFeed(stream), cli_input.reader, slots))
        elif cli_input.items is not None:
            stream = InputStream(stream_id, cli_input.media_urn, is_sequence=True)
            feed = StreamFeed(stream)
            for item in cli_input.items:
                feed.push_item(item, None, 0)
            feed.push_end()
        else:
            stream = InputStream(stream_id, cli_input.media_urn)
            feed = StreamFeed(stream)
            if cli_input.data:
                feed.push_data(cli_input.data)
            feed.push_end()
        streams.append(stream)
    from ._local import invoke_package

    package = InputPackage(streams, complete=True)
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        for stdin_feed, reader, slots in feeders:
            tg.start_soon(_feed, stdin_feed, reader, slots)
        try:
            # A closed stdout (``| head``) passes through as BrokenPipeError, not a handler error.
            await invoke_package(runtime, cap_urn, package, sink, reraise=(BrokenPipeError,))
        except Exception as exc:  # re-raised below, outside the task group (no ExceptionGroup)
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


def _releaser(slots: anyio.Semaphore) -> Any:
    """The ``consumed`` hook of a streamed stdin input: each block the handler takes frees
    one read-ahead slot."""

    async def consumed(_stream_id: str) -> None:
        slots.release()

    return consumed


async def _feed(stream: StreamFeed, reader: StdinReader, slots: anyio.Semaphore) -> None:
    """Push stdin into ``stream`` block by block, at most ``STDIN_READ_AHEAD`` unread."""
    blocks = reader.blocks()
    try:
        while True:
            await slots.acquire()
            block = await anyio.to_thread.run_sync(next, blocks, None, abandon_on_cancel=True)
            if block is None:
                break
            stream.push_data(block)
    except OSError as exc:
        stream.push_error(
            CartridgeError(
                f"reading standard input failed: {exc}",
                code=ErrorCode.INPUT_READ_FAILED,
                attribution_class=AttributionClass.ENVIRONMENT,
            )
        )
        return
    stream.push_end()


# -- rendering --------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return repr(value)


def _as_json_line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, default=_json_default) + "\n").encode("utf-8")


class _TerminalSink:
    """Renders the handler's emissions: main output to stdout, progress and logs to stderr."""

    def __init__(self, out: BinaryIO, err: TextIO) -> None:
        self._out = out
        self._err = err
        self._last = b"\n"  # nothing written yet counts as "at a line start"
        try:
            self._tty = out.isatty()
        except (AttributeError, ValueError, OSError):
            self._tty = False

    def _emit(self, data: bytes) -> None:
        if data:
            self._out.write(data)
            self._last = data[-1:]

    def write(self, output: OutputSpec, data: bytes) -> None:
        if output.is_main:
            self._emit(data)

    def value(self, output: OutputSpec, value: Any) -> None:
        if not output.is_main:
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            self._emit(bytes(value) + b"\n")
        elif isinstance(value, str):
            self._emit(value.encode("utf-8") + b"\n")
        else:
            self._emit(_as_json_line(value))

    def item(self, output: OutputSpec, value: Any, meta: Any) -> None:
        if not output.is_main:
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            self._emit(bytes(value) + b"\n")
        elif isinstance(value, str):
            self._emit(value.encode("utf-8") + b"\n")
        else:
            self._emit(_as_json_line(value))

    def close(self, output: OutputSpec) -> None:
        if output.is_main:
            self._out.flush()

    def progress(self, fraction: float | None, message: str) -> None:
        if fraction is None:
            self._err.write(f"[PROGRESS] {message}\n")
        else:
            self._err.write(f"[PROGRESS {fraction * 100:.0f}%] {message}\n")
        self._err.flush()

    def log(self, level: str, message: str, attribution_class: str, arg_urn: str | None) -> None:
        coordinate = f" arg={arg_urn}" if arg_urn else ""  # inside the brackets, as the reference
        self._err.write(f"[{level.upper()} {attribution_class}{coordinate}] {message}\n")
        self._err.flush()

    def end_line(self) -> None:
        """On a terminal, end a last line the output left open (the prompt stays clean)."""
        try:
            if self._tty and self._last != b"\n":
                self._out.write(b"\n")
            self._out.flush()
        except (BrokenPipeError, OSError):
            pass
