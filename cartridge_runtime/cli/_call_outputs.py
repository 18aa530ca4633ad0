"""``cartridge call``, part two: where each output goes, and what the terminal shows.

Destinations: the main output goes to stdout unless ``-o FILE`` / ``--output FILE`` (or
``--output NAME=FILE`` with the main output's name) sends it to a file; any declared output is
reachable with ``--output NAME=FILE`` (``NAME`` its name or media URN), and ``--output-dir DIR``
writes every output not named otherwise to ``DIR/NAME``. Files are written atomically: into a
hidden ``.NAME.*.part`` file beside the target, renamed over it only when the call succeeded,
removed otherwise, so a failed call leaves no partial or empty file behind.

Rendering (as the script's own CLI mode does): bytes and text raw, one sequence item per line,
any other value as a line of JSON; progress, logs and END's message on stderr. A progress bar
is drawn only when stderr is a terminal and stdout is not the same terminal; otherwise progress
is plain lines, each starting on a fresh line, so data on the terminal is never overdrawn. A
scalar output left without a final newline gets one on a terminal; binary data is refused
there, with the ``-o`` hint (:mod:`._terminal`). A closed stdout (``| head``)
ends the call quietly. An optional output that did not fire is named on stderr; ``--json``
prints the whole result instead (:func:`result_json`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

from ..manifest import CapDef, OutputDef
from ..urn import MediaUrn, UrnError
from ._call_inputs import _NAME, UsageError
from ._terminal import BINARY_ON_TERMINAL, looks_binary

__all__ = (
    "AtomicFile",
    "OutputPlan",
    "Renderer",
    "StdoutClosed",
    "absent_outputs",
    "output_name",
    "plan_outputs",
    "result_json",
)

#: The name the main output goes by when the cap is not in the manifest.
MAIN: Final = "main"


class StdoutClosed(Exception):
    """The reader of stdout went away (``| head``)."""


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class AtomicFile:
    """A file that appears, whole, only on :meth:`commit`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp: Path | None = None
        self._file: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"AtomicFile({str(self.path)!r})"

    def write(self, data: bytes) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent
            )
            self._tmp = Path(name)
            self._file = os.fdopen(fd, "wb")
        if data:
            self._file.write(data)

    def commit(self) -> None:
        """Rename the finished file over the target (an empty file if nothing was written)."""
        self.write(b"")
        assert self._file is not None and self._tmp is not None
        self._file.close()
        os.chmod(self._tmp, 0o666 & ~_umask())  # as open() would have made it
        os.replace(self._tmp, self.path)
        self._file = self._tmp = None

    def discard(self) -> None:
        """Remove what was written (the target is left as it was)."""
        if self._file is not None:
            self._file.close()
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.unlink()
        self._file = self._tmp = None


def _same_media(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return MediaUrn.parse(a).is_equivalent(MediaUrn.parse(b))
    except UrnError:
        return False


def output_name(cap: CapDef | None, key: str | None) -> str:
    """The declared name of the output an event's ``output`` key stands for (``None``: the
    main output); an undeclared one is named after its media URN."""
    if cap is not None:
        main = cap.main_output()
        for out in cap.outputs:
            if (key is None and out is main) or (
                key is not None and _same_media(out.media_urn, key)
            ):
                return out.name
    return MAIN if key is None else "".join(c if c.isalnum() else "_" for c in key)


def absent_outputs(cap: CapDef | None, started: set[str | None]) -> list[str]:
    """The names of the cap's optional outputs whose stream never started (``started`` holds
    the output keys that did)."""
    if cap is None:
        return []
    fired = {output_name(cap, key) for key in started}
    return [out.name for out in cap.outputs if out.optional and out.name not in fired]


def _jsonable(value: Any) -> Any:
    """A decoded value as JSON: text as it is, bytes as UTF-8 text when they are, else as
    ``{"base64": ...}``; containers walked."""
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            import base64  # for --json only

            return {"base64": base64.b64encode(data).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def result_json(cap: CapDef | None, result: Any) -> dict[str, Any]:
    """What ``cartridge call --json`` prints for a finished call: every output by its name
    (media URN, whether a sequence, its items each with its meta, or its data), the optional
    outputs that did not fire, and END's message."""
    outputs: dict[str, Any] = {}
    for key, out in result.outputs.items():
        entry: dict[str, Any] = {"media_urn": out.media_urn, "is_sequence": out.is_sequence}
        if out.is_sequence:
            entry["items"] = [
                {"value": _jsonable(i.value), "meta": _jsonable(dict(i.meta or {}))}
                for i in out.items
            ]
        elif out.values:
            entry["values"] = [_jsonable(v) for v in out.values]
        else:
            entry["data"] = _jsonable(out.data)
        outputs[output_name(cap, key)] = entry
    return {
        "ok": True,
        "outputs": outputs,
        "absent": absent_outputs(cap, set(result.outputs)),
        "message": result.message,
    }


class OutputPlan:
    """Which declared output goes where; ``None`` as a key is the main output."""

    def __init__(
        self,
        cap: CapDef | None,
        files: Mapping[str | None, Path],
        directory: Path | None,
    ) -> None:
        self._cap = cap
        self._files = dict(files)
        self._directory = directory
        self._sinks: dict[str | None, AtomicFile] = {}
        self._resolved: dict[str | None, AtomicFile | None] = {}

    def _path(self, key: str | None) -> Path | None:
        name = output_name(self._cap, key)
        for wanted, path in self._files.items():
            if wanted == name or (wanted is None and key is None):
                return path
        if self._directory is not None:
            return self._directory / name
        return None

    def sink(self, key: str | None) -> AtomicFile | None:
        """The file this output is written to, or ``None`` (stdout for the main output,
        nowhere for the others)."""
        try:
            return self._resolved[key]
        except KeyError:
            pass
        path = self._path(key)
        sink = None if path is None else AtomicFile(path)
        if sink is not None:
            self._sinks[key] = sink
        self._resolved[key] = sink
        return sink

    def commit(self) -> list[Path]:
        """Make every file written appear (and the main output's file, even when empty)."""
        if None not in self._sinks and self._path(None) is not None:
            self.sink(None)
        done = []
        for sink in self._sinks.values():
            sink.commit()
            done.append(sink.path)
        return done

    def discard(self) -> None:
        for sink in self._sinks.values():
            sink.discard()


def plan_outputs(cap: CapDef | None, specs: list[str], directory: Path | None) -> OutputPlan:
    """The :class:`OutputPlan` for ``--output`` values (``FILE`` or ``NAME=FILE``) and
    ``--output-dir``.

    :raises UsageError: an output named twice, or a ``NAME=`` the cap does not declare.
    """
    outputs: tuple[OutputDef, ...] = cap.outputs if cap is not None else ()
    main = cap.main_output() if cap is not None else None
    files: dict[str | None, Path] = {}
    for spec in specs:
        name, eq, rest = spec.partition("=")
        found = next(
            (o for o in outputs if eq and (o.name == name or _same_media(o.media_urn, name))),
            None,
        )
        if found is not None:
            key: str | None = None if found is main else found.name
            path = Path(rest)
        elif eq and name == MAIN and main is None:
            key, path = None, Path(rest)
        elif eq and cap is not None and _NAME.fullmatch(name):
            names = ", ".join(o.name for o in outputs) or "none"
            raise UsageError(
                f"--output: the cap has no output named {name!r} (outputs: {names}); "
                "write ./FILE for a file name with '='"
            )
        else:
            key, path = None, Path(spec)
        if key in files:
            raise UsageError(f"--output: output {key or 'main'!r} is given more than once")
        files[key] = path
    return OutputPlan(cap, files, directory)


def _line(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value) + b"\n"
    if isinstance(value, str):
        return value.encode("utf-8") + b"\n"
    return (json.dumps(value, ensure_ascii=False, default=repr) + "\n").encode("utf-8")


def _raw(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return _line(value)


class Renderer:
    """Writes a call's events: data to its destination, the rest to stderr."""

    def __init__(
        self,
        plan: OutputPlan,
        out: IO[bytes],
        err: IO[str],
        *,
        out_tty: bool,
        err_tty: bool,
        label: str,
    ) -> None:
        self._plan = plan
        self._out = out
        self._err = err
        self._out_tty = out_tty
        self._label = label
        # A bar redraws its line: only where no data is shown on the same terminal.
        self._bar_wanted = err_tty and (not out_tty or plan.sink(None) is not None)
        self._bar: Any = None
        self._task: Any = None
        self._open_line = False  # the terminal's data line has no newline yet
        self._last_progress: tuple[int, str] | None = None
        self.wrote_stdout = False
        self._judged = not out_tty  # off a terminal any bytes go

    def __repr__(self) -> str:
        return f"Renderer(label={self._label!r})"

    def _stdout(self, data: bytes) -> None:
        if not data:
            return
        if not self._judged:
            self._judged = True
            if looks_binary(data):
                raise UsageError(BINARY_ON_TERMINAL)
        try:
            self._out.write(data)
            self._out.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise StdoutClosed() from exc
        self.wrote_stdout = True
        self._open_line = not data.endswith(b"\n")

    def data(self, key: str | None, value: Any, *, item: bool) -> None:
        payload = _line(value) if item else _raw(value)
        sink = self._plan.sink(key)
        if sink is not None:
            sink.write(payload)
        elif key is None:
            self._stdout(payload)

    def _fresh_line(self) -> None:
        """Before a stderr line on the terminal the data is shown on, end the data's line."""
        if self._out_tty and self._open_line:
            self._err.write("\n")
            self._open_line = False

    def status(self, text: str) -> None:
        """One line on stderr (line breaks folded, so one line stays one line)."""
        if self._bar is not None:
            self._bar.console.print(" ".join(text.splitlines()), markup=False, highlight=False)
            return
        self._fresh_line()
        self._err.write(" ".join(text.splitlines()) + "\n")
        self._err.flush()

    def progress(self, fraction: float, message: str) -> None:
        """Show a progress report; one that would show the same (the same whole percent and
        message as the last) is skipped, so a handler reporting per chunk costs nothing."""
        shown = (round(fraction * 100), message)
        if shown == self._last_progress:
            return
        self._last_progress = shown
        if self._bar_wanted:
            if self._bar is None:
                from rich.console import Console
                from rich.progress import Progress as Bar

                self._bar = Bar(transient=True, console=Console(file=self._err))
                self._bar.start()
                self._task = self._bar.add_task(message or self._label, total=1.0)
            self._bar.update(self._task, completed=fraction, description=message or self._label)
            return
        self.status(f"[PROGRESS {round(fraction * 100)}%] {message}")

    def log(self, level: str, message: str, attribution_class: str | None, arg: str | None) -> None:
        tag = f"{level.upper()} {attribution_class or ''}".strip()
        self.status(f"[{tag}] {message}" + (f" arg={arg}" if arg else ""))

    def stop_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def finish(self) -> None:
        """End an open data line on a terminal, so the prompt starts on its own line."""
        self.stop_bar()
        if self._out_tty and self._open_line:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self._out.write(b"\n")
                self._out.flush()
            self._open_line = False
