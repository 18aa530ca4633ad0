"""``cartridge tee`` records a session byte for byte; ``cartridge trace`` decodes it back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cartridge_runtime.conformance._context import CheckContext, RunState
from cartridge_runtime.conformance._trace import C2H, H2C, capture_names, read_capture
from cartridge_runtime.protocol import FrameType, MessageId, encode_frame

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "fixtures" / "conform_raw_cartridge.py"
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def test_tee_is_transparent_and_trace_gives_back_the_frames(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    argv = [*CLI, "tee", "--out", str(out), "--", str(RAW)]
    ctx = CheckContext(argv, timeout=30, run=RunState(), check_id="tee")
    try:
        conn = ctx.ready()  # HELLO, identity, POLICY through the tee
        conn.identity()
        reply = conn.heartbeat(MessageId(9), seconds=10)
        assert reply is not None and reply.frame_type is FrameType.HEARTBEAT
        conn.session.close_stdin()
        assert (
            conn.session.wait_exit(time.monotonic() + 20) == 0
        )  # the tee passes on the exit status
        sent = [encode_frame(f) for f in conn.session.sent]
        received = [r.frame for r in conn.session.snapshot()]
    finally:
        ctx.close()
    names = capture_names(out)
    assert names[H2C].read_bytes() == b"".join(sent)  # byte for byte
    h2c = [f.frame for f in read_capture(names[H2C].read_bytes(), H2C)]
    c2h = [f.frame for f in read_capture(names[C2H].read_bytes(), C2H)]
    assert h2c == list(conn.session.sent)
    assert c2h == received

    listing = subprocess.run([*CLI, "trace", str(out)], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.strip().splitlines()[-1] == f"{len(h2c) + len(c2h)} frames"
    assert "H→C  HELLO" in listing.stdout and "C→H  HEARTBEAT" in listing.stdout

    jsonl = subprocess.run(
        [*CLI, "trace", str(names[H2C]), str(names[C2H]), "--jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert jsonl.returncode == 0, jsonl.stderr
    lines = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(lines) == len(h2c) + len(c2h)
    assert [x["type"] for x in lines[:2]] == ["HELLO", "HELLO"]  # interleaved by arrival
    assert {x["dir"] for x in lines} == {H2C, C2H}
    setup = [x["type"] for x in lines if x["phase"] == "setup"]
    assert setup[-1] == "POLICY" and "REQ" in setup
