"""Running the catalogue against one target: concurrency, timeouts, the report."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from xml.etree import ElementTree as ET

import attrs

# isort: off
# Registration order is report order: handshake, requests and the audit, flow, robustness.
from . import _checks_handshake  # noqa: F401
from . import _checks_requests  # noqa: F401
from . import _checks_flow  # noqa: F401
from . import _checks_robust  # noqa: F401
from . import _checks_dispatch  # noqa: F401
from . import _checks_cli  # noqa: F401

# isort: on
from ._audit import audit_conn
from ._checks_requests import run_baseline, run_baseline_frame, run_sweep
from ._context import CheckContext, RunState
from ._model import CATALOGUE, Check, CheckResult, Level, Status
from ._outcomes import CheckFailed, CheckSkipped
from ._session import target_command

__all__ = ("DEFAULT_TIMEOUT", "Report", "default_jobs", "run_conformance", "select_checks")

#: Seconds one check may take before its processes are killed and it fails.
DEFAULT_TIMEOUT = 20.0


@attrs.frozen(kw_only=True)
class Report:
    """The verdicts of one run."""

    target: str
    results: tuple[CheckResult, ...]
    duration: float

    def count(self, status: Status) -> int:
        """How many checks ended with ``status``."""
        return sum(1 for r in self.results if r.status is status)

    @property
    def ok(self) -> bool:
        """Every MUST check passed (SHOULD failures and skips are allowed)."""
        return not any(r.failed_must for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The failed checks (MUST and SHOULD)."""
        return tuple(r for r in self.results if r.status is Status.FAIL)

    def summary(self) -> str:
        """``N passed, N failed, N skipped``."""
        n = self.count
        return f"{n(Status.PASS)} passed, {n(Status.FAIL)} failed, {n(Status.SKIP)} skipped"

    def to_json(self) -> dict[str, object]:
        """The whole report as JSON-able data."""
        return {
            "target": self.target,
            "ok": self.ok,
            "summary": self.summary(),
            "duration": round(self.duration, 3),
            "results": [r.to_json() for r in self.results],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_json` to ``path``."""
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")

    def write_junit(self, path: str | os.PathLike[str]) -> None:
        """Write a JUnit XML file (one testcase per check) to ``path``."""
        suite = ET.Element(
            "testsuite",
            name="cartridge-conformance",
            tests=str(len(self.results)),
            failures=str(self.count(Status.FAIL)),
            skipped=str(self.count(Status.SKIP)),
            time=f"{self.duration:.3f}",
        )
        for r in self.results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"conformance.{r.level}",
                name=f"{r.id} {r.title}",
                time=f"{r.duration:.3f}",
            )
            if r.status is Status.FAIL:
                msg = r.detail + (f" [known defect: {r.known_defect}]" if r.known_defect else "")
                ET.SubElement(case, "failure", message=msg).text = msg
            elif r.status is Status.SKIP:
                ET.SubElement(case, "skipped", message=r.detail)
        ET.ElementTree(suite).write(str(path), encoding="utf-8", xml_declaration=True)


def select_checks(only: Iterable[str] | None = None) -> list[Check]:
    """The catalogue, or the checks named in ``only`` (ids, comma lists allowed).

    :raises ValueError: an id that is not in the catalogue.
    """
    if not only:
        return list(CATALOGUE)
    wanted = {part.strip().upper() for item in only for part in item.split(",") if part.strip()}
    known = {c.id for c in CATALOGUE}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown check id(s): {', '.join(unknown)}")
    return [c for c in CATALOGUE if c.id in wanted]


def _check_runnable(argv: list[str]) -> None:
    """Refuse a target that cannot even be started, before spawning anything.

    :raises FileNotFoundError: the script or executable does not exist.
    :raises PermissionError: the executable is not executable.
    """
    exe = argv[0]
    if argv[0] in (sys.executable, "node") and len(argv) > 1 and argv[1].endswith((".py", ".js")):
        if not Path(argv[1]).is_file():
            raise FileNotFoundError(f"no such cartridge script: {argv[1]}")
        if shutil.which(argv[0]) is None:
            raise FileNotFoundError(f"{argv[0]} is not installed: it runs {argv[1]}")
        return
    found = shutil.which(exe) if os.sep not in exe else (exe if Path(exe).exists() else None)
    if found is None:
        raise FileNotFoundError(f"no such cartridge executable: {exe}")
    if not os.access(found, os.X_OK):
        raise PermissionError(f"cartridge is not executable: {exe}")


def _run_job(
    func: Callable[[CheckContext], str], ctx: CheckContext, timeout: float
) -> tuple[Status, str, str | None, float]:
    start = time.monotonic()
    ctx.deadline = start + timeout  # the clock starts when the job does, not when queued
    done = threading.Event()

    def watchdog() -> None:
        # ctx.deadline may move (waiting for the shared session does not count)
        while not done.wait(max(0.05, ctx.deadline + 2.0 - time.monotonic())):
            if time.monotonic() >= ctx.deadline + 2.0:
                ctx.close()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    status, detail, defect = Status.PASS, "", None
    try:
        detail = func(ctx)
    except CheckFailed as exc:
        status, detail, defect = Status.FAIL, exc.detail, exc.known_defect
    except CheckSkipped as exc:
        status, detail = Status.SKIP, str(exc)
    except Exception as exc:
        status = Status.FAIL
        detail = f"kit error: {type(exc).__name__}: {exc}"
        if os.environ.get("CARTRIDGE_CONFORM_DEBUG"):
            traceback.print_exc()
    finally:
        done.set()
        timed_out = ctx.cancelled
        ctx.release_shared(broken=timed_out or status is Status.FAIL)
        ctx.close()
        for i, conn in enumerate(ctx.conns):
            audit_conn(conn, ctx.run, f"[{ctx.check_id} #{i}]", frozenset(ctx.audit_skip))
    if timed_out and status is not Status.PASS:
        status, detail = Status.FAIL, f"timed out after {timeout:g} s ({detail})"
    return status, detail, defect, time.monotonic() - start


def _schedule(live: list[Check]) -> list[Check]:
    """Submission order: checks that start processes of their own (most first) alternate
    with the rest, so process start-up overlaps the checks that share a session instead of
    queueing behind them (the report keeps catalogue order)."""
    fresh = sorted((c for c in live if c.procs), key=lambda c: -c.procs)
    rest = [c for c in live if not c.procs]
    out: list[Check] = []
    while fresh or rest:
        if fresh:
            out.append(fresh.pop(0))
        out.extend(rest[:2])
        del rest[:2]
    return out


def run_conformance(
    target: str | os.PathLike[str] | Sequence[str],
    *,
    only: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> Report:
    """Run the catalogue (or ``only`` those ids) against ``target``.

    ``target`` is a ``.py`` script (run with this interpreter), a ``.js`` script (run with
    ``node``), an executable, or a ready argv. Checks that drive processes run concurrently
    (``jobs`` at a time, default :func:`default_jobs`); the audit checks are judged at the
    end from every session's frames. Every process the run starts is killed and reaped before it returns.
    """
    argv = target_command(target)
    _check_runnable(argv)
    checks = select_checks(only)
    run = RunState()
    try:
        return _run(argv, checks, run, timeout, jobs or default_jobs(), on_result)
    finally:
        run.kill_all()  # whatever happened (even an interrupt), no process outlives the run


def default_jobs() -> int:
    """Checks run at once by default: the checks mostly wait on their target, whose start
    (an interpreter import, typically) is what costs CPU, so a few per core keep every core
    busy without thrashing them."""
    return max(4, min(8, 3 * (os.cpu_count() or 2)))


def _run(
    argv: list[str],
    checks: list[Check],
    run: RunState,
    timeout: float,
    jobs: int,
    on_result: Callable[[CheckResult], None] | None,
) -> Report:
    started = time.monotonic()
    results: dict[str, CheckResult] = {}
    live = [c for c in checks if not c.audit]
    audited = [c for c in checks if c.audit]

    def record(c: Check, status: Status, detail: str, defect: str | None, took: float) -> None:
        res = CheckResult(
            id=c.id,
            title=c.title,
            level=c.level,
            status=status,
            detail=detail,
            duration=took,
            known_defect=defect,
        )
        results[c.id] = res
        if on_result is not None:
            on_result(res)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures: dict[
            concurrent.futures.Future[tuple[Status, str, str | None, float]], Check | None
        ] = {}
        if audited:
            ctx = CheckContext(argv, timeout=timeout * 2, run=run, check_id="baseline")
            futures[pool.submit(_run_job, run_baseline, ctx, timeout * 2)] = None
            ctx = CheckContext(argv, timeout=timeout * 2, run=run, check_id="baseline-frame")
            futures[pool.submit(_run_job, run_baseline_frame, ctx, timeout * 2)] = None
            ctx = CheckContext(argv, timeout=timeout * 2, run=run, check_id="sweep")
            futures[pool.submit(_run_job, run_sweep, ctx, timeout * 2)] = None
        for c in _schedule(live):
            ctx = CheckContext(argv, timeout=timeout, run=run, check_id=c.id)
            futures[pool.submit(_run_job, c.func, ctx, timeout)] = c
        baseline_note = ""
        try:
            for fut in concurrent.futures.as_completed(futures):
                job = futures[fut]
                status, detail, defect, took = fut.result()
                if job is None:
                    baseline_note = "" if status is Status.PASS else detail
                    continue
                record(job, status, detail, defect, took)
        except BaseException:  # an interrupt: end the running checks at once, start no more
            run.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    for i, conn in enumerate(run.shared_all):
        conn.session.kill()
        audit_conn(conn, run, f"[shared #{i}]")
    for c in audited:
        t0 = time.monotonic()
        ctx = CheckContext(argv, timeout=timeout, run=run, check_id=c.id)
        try:
            detail = c.func(ctx)
            status, defect = Status.PASS, None
        except CheckFailed as exc:
            status, detail, defect = Status.FAIL, exc.detail, exc.known_defect
        except CheckSkipped as exc:
            status, detail, defect = Status.SKIP, str(exc), None
        if status is Status.PASS and baseline_note and not run.audited_sessions:
            status, detail = Status.FAIL, f"no traffic to audit: {baseline_note}"
        record(c, status, detail, defect, time.monotonic() - t0)
    ordered = tuple(results[c.id] for c in checks)
    return Report(target=" ".join(argv), results=ordered, duration=time.monotonic() - started)


def level_of(check_id: str) -> Level:
    """The level of a catalogue check."""
    for c in CATALOGUE:
        if c.id == check_id:
            return c.level
    raise KeyError(check_id)
