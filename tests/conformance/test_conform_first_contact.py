"""What a new implementer meets first in the kit: text on stdout named in words (before the
first frame a SHOULD failure, not a crash), and audits with nothing to audit skipped."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from cartridge_runtime.conformance import Level, Status, run_conformance
from cartridge_runtime.conformance._session import Session, TargetGone, WaitTimeout

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"


def _greeting_target(tmp_path: Path, greeting: str) -> list[str]:
    """The raw conformant cartridge behind a wrapper that prints ``greeting`` first."""
    wrapper = tmp_path / "greeter.py"
    wrapper.write_text(
        "import os, sys\n"
        f"sys.stdout.write({greeting!r}); sys.stdout.flush()\n"
        f"os.execv(sys.executable, [sys.executable, {str(RAW)!r}])\n"
    )
    return [sys.executable, str(wrapper)]


def test_text_before_the_first_frame_is_a_should_failure_not_a_crash(tmp_path: Path) -> None:
    target = _greeting_target(tmp_path, "Loading model weights...\nready\n")
    report = run_conformance(target, only=["FRM-25", "HSK-2", "HSK-14", "TYP-5", "FRM-2"])
    results = {r.id: r for r in report.results}
    assert results["FRM-25"].status is Status.FAIL
    assert results["FRM-25"].level is Level.SHOULD
    assert "'Loading model weights...'" in results["FRM-25"].detail
    for rule in ("HSK-2", "HSK-14", "TYP-5", "FRM-2"):
        assert results[rule].status is Status.PASS, (rule, results[rule].detail)
    assert report.ok


def test_a_cartridge_with_clean_stdout_passes_the_text_check() -> None:
    report = run_conformance([sys.executable, str(RAW)], only=["FRM-25"])
    (result,) = report.results
    assert result.status is Status.PASS, result.detail


def _first_failure(session: Session) -> str:
    deadline = time.monotonic() + 10
    try:
        while True:
            session.recv(deadline)
    except TargetGone as exc:
        return str(exc)
    except WaitTimeout:
        return "no end"
    finally:
        session.kill()


def test_text_after_a_frame_is_reported_in_words() -> None:
    program = (
        "import sys\n"
        "from cartridge_runtime.protocol import MessageId, encode_frame, frames\n"
        "out = sys.stdout.buffer\n"
        "out.write(encode_frame(frames.heartbeat(MessageId.new())))\n"
        "out.write(b'debug: x = 42\\n'); out.flush()\n"
        "import time; time.sleep(30)\n"
    )
    session = Session([sys.executable, "-c", program])
    message = _first_failure(session)
    assert "text" in message and "'debug: x = 42'" in message, message
    assert "length prefix" not in message


def test_a_cartridge_that_never_starts_has_nothing_to_audit() -> None:
    dead = [sys.executable, "-c", "import sys; sys.exit(3)"]
    report = run_conformance(dead, only=["TYP-5", "REQ-11", "FRM-17", "FRM-25"], timeout=3)
    for result in report.results:
        assert result.status is Status.SKIP, (result.id, result.status, result.detail)
        assert "nothing to audit" in result.detail


def test_the_kit_starts_entries_as_the_engine_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cartridge_runtime.conformance._session import target_command

    script = tmp_path / "cart.js"
    script.write_text("")
    assert target_command(str(script)) == ["node", str(script)]
    assert target_command(str(RAW)) == [sys.executable, str(RAW)]
    (tmp_path / "ls").write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    assert target_command("ls") == ["./ls"]


def test_manifest_key_order_is_judged_object_by_object() -> None:
    from cartridge_runtime.conformance._checks_handshake import _field_order_problem

    model = {"name": "x", "cap_groups": [{"name": "g", "caps": [{"urn": "u", "title": "t"}]}]}
    same = {"name": "y", "cap_groups": [{"name": "h", "caps": [{"urn": "v", "title": "s"}]}]}
    assert _field_order_problem(same, model, "manifest") is None
    swapped = {"name": "x", "cap_groups": [{"name": "g", "caps": [{"title": "t", "urn": "u"}]}]}
    problem = _field_order_problem(swapped, model, "manifest")
    assert problem == "manifest.cap_groups[0].caps[0]: keys ['title', 'urn'], want ['urn', 'title']"
