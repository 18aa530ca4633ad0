"""The kit never leaves a process behind: a target that hangs (and starts a child of its
own) is killed and reaped, grandchild included, by the end of the run; the byte-form audit
judges single frames as the spec's SHOULD rules say."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import cbor2
import pytest

from cartridge_runtime.conformance import Status, run_conformance
from cartridge_runtime.conformance._byteform import byte_form_findings
from cartridge_runtime.conformance._runner import default_jobs
from cartridge_runtime.protocol import MessageId, encode_body
from cartridge_runtime.protocol import frames as build


def _processes() -> list[tuple[int, int, str, str]]:
    """(pid, ppid, state, cmdline) of every process visible in /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out.append((int(entry), int(fields[1]), fields[0], cmd))
    return out


def _children() -> set[int]:
    me = os.getpid()
    return {pid for pid, ppid, _state, _cmd in _processes() if ppid == me}


def test_a_hanging_target_and_its_child_leave_nothing_behind(tmp_path: Path) -> None:
    marker = f"conform-leak-{uuid.uuid4().hex}"
    script = tmp_path / "hang.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "time.sleep(300)\n"
    )
    before = _children()
    report = run_conformance(
        [sys.executable, str(script), marker],
        only=["HSK-3", "HSK-6", "HSK-19", "FLW-12", "FRM-20", "FRM-23", "CLI-2"],
        timeout=1.0,
    )
    assert all(r.status is Status.FAIL for r in report.results), report.results
    assert _children() == before  # every direct child killed and reaped (no zombie)
    left = [(pid, cmd) for pid, _pp, _st, cmd in _processes() if marker in cmd]
    assert left == []  # the targets' own children went with their process group


def test_default_jobs_follows_the_cpu_count() -> None:
    assert 4 <= default_jobs() <= 8


def test_byte_form_findings_name_the_rule() -> None:
    end = build.end(MessageId(1))
    body = encode_body(end)
    assert byte_form_findings(end, body) == ()
    m = cbor2.loads(body)
    reordered = cbor2.dumps(dict(reversed(list(m.items()))))
    assert [r for r, _ in byte_form_findings(end, reordered)] == ["FRM-17"]
    half = body.replace(b"\xfb\x3f\xf0\x00\x00\x00\x00\x00\x00", b"\xf9\x3c\x00")
    assert [r for r, _ in byte_form_findings(end, half)] == ["FRM-18"]
    swapped = end.replace(meta=dict(reversed(list((end.meta or {}).items()))))
    assert [r for r, _ in byte_form_findings(swapped, encode_body(swapped))] == ["FRM-19"]
    with_null = cbor2.dumps({**m, 4: None})
    assert [r for r, _ in byte_form_findings(end, with_null)] == ["FRM-17"]


def test_a_run_stopped_midway_kills_its_processes(tmp_path: Path) -> None:
    """An exception out of the run (here from the result callback, as an interrupt would
    come) stops the running checks and still leaves no process behind."""
    marker = f"conform-stop-{uuid.uuid4().hex}"
    script = tmp_path / "hang.py"
    script.write_text("import time\ntime.sleep(300)\n")

    def stop(_result: object) -> None:
        raise RuntimeError("stop")

    before = _children()
    with pytest.raises(RuntimeError, match="stop"):
        run_conformance(
            [sys.executable, str(script), marker],
            only=["HSK-3", "HSK-6", "FRM-20", "FRM-23", "TYP-10"],
            timeout=1.0,
            on_result=stop,
        )
    assert _children() == before
    assert [pid for pid, _pp, _st, cmd in _processes() if marker in cmd] == []
