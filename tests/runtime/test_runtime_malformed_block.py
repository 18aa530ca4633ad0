"""Frames that arrive in the same read as a malformed one are still served, in order, before
the cartridge reports the malformed one (FRM-20, FRM-21): a whole session and an oversized
length prefix written in one block get a HELLO, the identity echo, an ERR for the request
left open (and the identity request an END, or an ERR if it was still in flight) and an ERR
with id 0, not silence."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from cartridge_runtime.protocol import (
    IDENTITY_CAP,
    ZERO_ID,
    FrameDecoder,
    FrameType,
    IdentityCheck,
    Limits,
    MessageId,
    encode_frame,
    frames,
)

HERE = Path(__file__).resolve().parents[1]
SCRIPT = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from _runtime_cartridge import build_runtime
build_runtime().run()
"""


def test_a_session_and_an_oversized_prefix_in_one_block() -> None:
    check = IdentityCheck()
    open_rid = MessageId.new()
    block = (
        encode_frame(frames.hello(Limits()))
        + b"".join(encode_frame(f) for f in check.frames())
        + encode_frame(frames.policy("full"))
        + encode_frame(frames.req(open_rid, IDENTITY_CAP))  # left open: no stream, no END
        + struct.pack(">I", 1 << 30)  # an oversized length prefix, in the same write
    )
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=block, capture_output=True, timeout=60, check=False
    )
    assert proc.returncode not in (0, None), proc.stderr.decode()
    decoder = FrameDecoder()
    decoder.feed(proc.stdout)
    decoder.feed(b"")
    got = decoder.frames()
    assert got and got[0].frame_type is FrameType.HELLO, proc.stderr.decode()
    # the identity request was complete: it is answered, or failed as still in flight
    identity = [f for f in got if f.id == check.rid]
    assert identity and identity[-1].frame_type in (FrameType.END, FrameType.ERR)
    ended_open = [f for f in got if f.id == open_rid and f.frame_type is FrameType.ERR]
    assert len(ended_open) == 1 and (ended_open[0].meta or {}).get("code") == "PROTOCOL_ERROR"
    zero = [f for f in got if f.id == ZERO_ID and f.frame_type is FrameType.ERR]
    assert len(zero) == 1 and (zero[0].meta or {}).get("code") == "PROTOCOL_ERROR"
    assert "exceeds max_frame" in proc.stderr.decode()
