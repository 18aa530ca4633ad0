"""Run records: a folder per machine run, written as the run goes, read back by the tools.

Rules (MCH-26, MCH-27):

1. A run folder holds ``machine.txt`` (the machine's text), ``events.jsonl`` (one JSON object
   per event, in order, each with ``t``: seconds since the run started) and ``run.json`` (what
   the run was given and how it ended). ``run.json`` is written when the run starts, with
   ``status`` ``running``, and replaced (a temporary file renamed) when it ends with ``ok``,
   ``failed`` or ``interrupted``. It names the process that wrote it (``pid``, ``host``): a
   run still ``running`` whose process is gone from this host is read back as ``stale`` (it
   was killed with no chance to say so).
2. The event log never holds output data: an output piece is logged as its size. A step's
   start and end are flushed to the file as they happen.
3. An interrupted run logs, before it ends, one ``StepInterrupted`` event per step that was
   running: since when (``seconds``), its items, and the bytes it had taken in and given out
   beyond its finished calls.

A :class:`RunRecorder` is an observer of one run (it is told each event); :func:`read_run`
and :func:`list_runs` read folders back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import attrs

from ..._home import cartridge_home
from .._errors import CallError
from ._events import MachineOutputData, MachineRunError, StepFinished, StepStarted
from ._report import Reports

__all__ = (
    "RECORD_FORMAT",
    "RunRecorder",
    "RunRecord",
    "read_run",
    "list_runs",
    "read_events",
    "default_home",
    "default_runs_dir",
    "default_cache_dir",
    "machine_digest",
    "step_totals",
)

#: The run.json format this code writes.
RECORD_FORMAT: Final = 1
#: Characters of each cartridge's stderr a failed run keeps.
STDERR_TAIL: Final = 4000


def default_home() -> Path:
    """``$CARTRIDGE_HOME``, else ``$XDG_CACHE_HOME/cartridge``, else ``~/.cache/cartridge``."""
    return cartridge_home()


def default_runs_dir() -> Path:
    return default_home() / "runs"


def default_cache_dir() -> Path:
    return default_home() / "steps"


def machine_digest(text: str) -> str:
    """A machine's text as the records know it (``--resume`` finds the last run of it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _new_run_id(now: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def _write_json(path: Path, obj: Any) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".run.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, default=str)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _input_facts(media: str | None, value: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"media": media}
    data: bytes | None = None
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    if data is not None:
        facts.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    elif isinstance(value, os.PathLike):
        digest, size = hashlib.sha256(), 0
        with Path(value).open("rb", buffering=0) as f:
            while block := f.read(1 << 20):
                digest.update(block)
                size += len(block)
        facts.update(path=os.fspath(value), size=size, sha256=digest.hexdigest())
    elif isinstance(value, list | tuple):
        facts.update(items=len(value))
    else:
        facts.update(streamed=True)  # an async iterable: known only as it passes
    return facts


def _graph(machine: Any) -> dict[str, Any]:
    """The machine's shape for a report: nodes and steps by the names the text wrote."""

    def label(name: str) -> str:
        node = machine.node(name)
        return str(node.label or node.name)

    inputs = {n.name for n in machine.inputs}
    outputs = {n.name for n in machine.outputs}
    return {
        "nodes": [
            {
                "name": node.label or node.name,
                "media": node.media.text,
                "role": "input"
                if node.name in inputs
                else "output"
                if node.name in outputs
                else "inner",
                "per_item": bool(node.scope),
            }
            for node in machine.nodes
        ],
        "steps": [
            {
                "name": step.label or step.alias,
                "cap": step.cap.text,
                "inputs": [label(b.node) for b in step.bindings if b.node is not None],
                "outputs": [label(o.node) for o in step.outputs],
                "per_item": step.placement.per_item,
            }
            for step in machine.steps
        ],
    }


def _event_json(event: Any, t: float) -> dict[str, Any]:
    line: dict[str, Any] = {"t": round(t, 6), "event": type(event).__name__}
    if isinstance(event, MachineOutputData):
        value = event.value
        size = (
            len(value)
            if isinstance(value, bytes | bytearray | str)
            else value.nbytes
            if isinstance(value, memoryview)
            else 0
        )
        line.update(output=event.output, is_item=event.is_item, bytes=size)
        return line
    for field in attrs.fields(type(event)):
        line[field.name] = getattr(event, field.name)
    return line


def _error_json(error: BaseException) -> dict[str, Any]:
    if isinstance(error, MachineRunError):
        return {
            "step": error.step,
            "item": error.item,
            "cap": error.cap,
            "code": str(error.code),
            "class": str(error.attribution_class),
            "message": error.cause.message,
        }
    if isinstance(error, CallError):
        return {
            "code": str(error.code),
            "class": str(error.attribution_class),
            "message": error.message,
        }
    return {"code": type(error).__name__, "class": "", "message": str(error)}


class RunRecorder:
    """Writes one run's folder under ``runs_dir`` (module rule 1), as an observer of the run.

    :param engine: the engine, for its cartridges' stderr tails when the run fails.
    :param text: the machine's text as the caller wrote it (default: its canonical text).
    :param source: where the text came from (a file name), for listings.
    :param extra: more facts for run.json (the cache folder, the command line).
    """

    def __init__(
        self,
        runs_dir: str | os.PathLike[str],
        *,
        engine: Any = None,
        text: str | None = None,
        source: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.started = time.time()
        self.run_id = _new_run_id(self.started)
        self.folder = Path(runs_dir).expanduser() / self.run_id
        self.folder.mkdir(parents=True)
        self._engine = engine
        self._text = text
        self._source = source
        self._extra = dict(extra or {})
        self._t0 = time.monotonic()
        self._log: IO[str] | None = None
        self._run: dict[str, Any] = {}
        self._ended = False
        self._reports: Any = None
        #: (step, item) -> when its call started (run seconds), for the calls not finished.
        self._running: dict[tuple[str, int | None], float] = {}
        #: step -> bytes in and out of its finished calls.
        self._finished: dict[str, tuple[int, int]] = {}

    # -- the observer -----------------------------------------------------------------------

    def machine_event(self, runner: Any, event: Any) -> None:
        if event is None:
            self._begin(runner)
        elif isinstance(event, BaseException):
            self.end(event)
        elif isinstance(event, Reports):
            self.end(None)
        elif self._log is not None:
            t = self._elapsed()
            self._log.write(json.dumps(_event_json(event, t), default=str) + "\n")
            self._track(event, t)

    def _track(self, event: Any, t: float) -> None:
        """Keep the calls that are running, to log them if the run is interrupted."""
        if isinstance(event, StepStarted):
            self._running[(event.step, event.item)] = t
            self._flush()
        elif isinstance(event, StepFinished):
            self._flush()
            self._running.pop((event.step, event.item), None)
            done_in, done_out = self._finished.get(event.step, (0, 0))
            self._finished[event.step] = (done_in + event.bytes_in, done_out + event.bytes_out)

    def _flush(self) -> None:
        """Step events reach the file at once (a few per call, not per chunk), so a run killed
        outright still shows which steps ran."""
        if self._log is not None:
            self._log.flush()

    def _log_interrupted(self) -> None:
        """Rule 3: the steps that were running when the run was interrupted."""
        if self._log is None or not self._running:
            return
        now = self._elapsed()
        so_far = self._reports.bytes_so_far() if self._reports is not None else {}
        by_step: dict[str, list[tuple[int | None, float]]] = {}
        for (step, item), began in self._running.items():
            by_step.setdefault(step, []).append((item, began))
        for step, calls in by_step.items():
            total_in, total_out = so_far.get(step, (0, 0))
            done_in, done_out = self._finished.get(step, (0, 0))
            began = min(b for _, b in calls)
            line = {
                "t": round(now, 6),
                "event": "StepInterrupted",
                "step": step,
                "items": sorted(i for i, _ in calls if i is not None),
                "started": round(began, 6),
                "seconds": round(now - began, 6),
                "bytes_in": max(total_in - done_in, 0),
                "bytes_out": max(total_out - done_out, 0),
            }
            self._log.write(json.dumps(line) + "\n")

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _begin(self, runner: Any) -> None:
        machine = runner.machine
        text = self._text if self._text is not None else machine.to_notation()
        (self.folder / "machine.txt").write_text(text, encoding="utf-8")
        inputs = {}
        for node in machine.inputs:
            media, value = runner.inputs[node.name]
            inputs[node.label or node.name] = _input_facts(media, value)
        self._reports = getattr(runner, "reports", None)
        self._run = {
            "format": RECORD_FORMAT,
            "id": self.run_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "machine": self._source or "(text)",
            "machine_sha256": machine_digest(text),
            "started": self.started,
            "status": "running",
            "inputs": inputs,
            "graph": _graph(machine),
            **self._extra,
        }
        _write_json(self.folder / "run.json", self._run)
        self._log = (self.folder / "events.jsonl").open("w", encoding="utf-8")

    def end(self, error: BaseException | None) -> None:
        """Write the outcome (``interrupted`` for a cancel or ^C, ``failed`` for any other
        exception). Idempotent: the first call wins."""
        if self._ended or not self._run:
            return
        self._ended = True
        if error is None:
            status = "ok"
        elif isinstance(error, KeyboardInterrupt) or _is_cancel(error):
            status = "interrupted"
        else:
            status = "failed"
        if status == "interrupted":
            self._log_interrupted()
        if self._log is not None:
            self._log.close()
        ended = time.time()
        self._run.update(status=status, ended=ended, seconds=round(ended - self.started, 6))
        if error is not None and status == "failed":
            self._run["error"] = _error_json(error)
            self._run["stderr"] = self._stderr_tails()
        _write_json(self.folder / "run.json", self._run)

    def amend(self, **facts: Any) -> None:
        """Add or correct facts of the ended run (a caller's own reason, such as its timeout)."""
        if not self._run:
            return
        self._run.update(facts)
        if facts.get("status") == "failed" and "stderr" not in self._run:
            self._run["stderr"] = self._stderr_tails()
        _write_json(self.folder / "run.json", self._run)

    def _stderr_tails(self) -> dict[str, str]:
        tails: dict[str, str] = {}
        status = getattr(self._engine, "status", None)
        if status is None:
            return tails
        with contextlib.suppress(Exception):
            for one in status():
                if one.stderr_tail:
                    tails[one.name] = one.stderr_tail[-STDERR_TAIL:]
        return tails


def _is_cancel(error: BaseException) -> bool:
    import anyio

    return isinstance(error, anyio.get_cancelled_exc_class())


# -- reading -------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunRecord:
    """One run folder, read back."""

    id: str
    folder: Path
    machine: str
    started: float
    status: str
    seconds: float | None
    facts: Mapping[str, Any] = attrs.field(repr=False)


def read_run(folder: str | os.PathLike[str]) -> RunRecord:
    """The run in ``folder``.

    :raises OSError: no run.json there.
    :raises ValueError: run.json is not a run record.
    """
    path = Path(folder)
    facts = json.loads((path / "run.json").read_text(encoding="utf-8"))
    if not isinstance(facts, dict) or "id" not in facts:
        raise ValueError(f"{path / 'run.json'} is not a run record")
    status = str(facts.get("status", "running"))
    if status == "running" and _writer_gone(facts):
        status = "stale"
    return RunRecord(
        id=str(facts["id"]),
        folder=path,
        machine=str(facts.get("machine", "")),
        started=float(facts.get("started", 0.0)),
        status=status,
        seconds=facts.get("seconds"),
        facts=facts,
    )


def _writer_gone(facts: Mapping[str, Any]) -> bool:
    """Whether the process that wrote a ``running`` record is gone from this host (a record
    from another host, or one without a pid, is taken at its word)."""
    pid = facts.get("pid")
    if not isinstance(pid, int) or facts.get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, owned by someone else
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A process that exited and was not reaped yet is gone too."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def list_runs(runs_dir: str | os.PathLike[str]) -> list[RunRecord]:
    """Every readable run under ``runs_dir``, the most recent first."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    runs = []
    for folder in root.iterdir():
        with contextlib.suppress(OSError, ValueError):
            runs.append(read_run(folder))
    runs.sort(key=lambda r: (r.started, r.id), reverse=True)
    return runs


def read_events(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The run's events in order (a line cut short by a crash is left out)."""
    events = []
    try:
        lines = (Path(folder) / "events.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events


def step_totals(events: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per step, from its events: calls made, runs, items, skipped, cache hits and misses,
    interrupted calls, bytes in and out, seconds (summed over its runs; an interrupted call's
    bytes and time so far included)."""
    totals: dict[str, dict[str, Any]] = {}

    def of(step: str) -> dict[str, Any]:
        return totals.setdefault(
            step,
            dict.fromkeys(
                ("calls", "runs", "items", "skipped", "absent", "hits", "misses", "interrupted"), 0
            )
            | {"bytes_in": 0, "bytes_out": 0, "seconds": 0.0},
        )

    for e in events:
        kind = e.get("event")
        if kind == "StepStarted":
            of(e["step"])["calls"] += 1
        elif kind == "StepInterrupted":
            t = of(e["step"])
            t["interrupted"] += 1
            t["bytes_in"] += int(e.get("bytes_in", 0))
            t["bytes_out"] += int(e.get("bytes_out", 0))
            t["seconds"] += float(e.get("seconds", 0.0))
        elif kind == "StepFinished":
            t = of(e["step"])
            outcome = e.get("outcome")
            if outcome == "skipped":
                t["skipped"] += 1
                continue
            t["runs"] += 1
            t["absent"] += outcome == "absent"
            t["items"] += e.get("item") is not None
            t["hits"] += e.get("cache") == "hit"
            t["misses"] += e.get("cache") == "miss"
            t["calls"] -= e.get("cache") == "hit"
            t["bytes_in"] += int(e.get("bytes_in", 0))
            t["bytes_out"] += int(e.get("bytes_out", 0))
            t["seconds"] += float(e.get("seconds", 0.0))
    return totals
