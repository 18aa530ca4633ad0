"""A cartridge host's forwarding table (RLY-18): the compiled forwarding writes, for every
frame it takes, the bytes the Python path (the peer link's rewrite, then the outbox's
numbering and encoding) writes, and leaves every other frame to that path untouched.

The unit tests run the same frames through both on two real outboxes; the session test runs
a raw switch against a host twice, compiled and with ``CARTRIDGE_RUNTIME_PURE_PYTHON=1``, and
compares the bytes of the answers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cartridge_runtime._plumbing import FrameOutbox
from cartridge_runtime.protocol import Frame, FrameType, MessageId, SeqAssigner, frames
from cartridge_runtime.relay import forwarding_compiled, switch_dispatch, switch_forwarder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_FRAME = 1 << 20

compiled = pytest.mark.skipif(not forwarding_compiled(), reason="the compiled module is not in use")


def _outbox(seq: SeqAssigner | None = None) -> FrameOutbox:
    box = FrameOutbox(None, lambda: MAX_FRAME, number=None if seq is None else seq.number)
    box.hold()  # as the pump holds it while it dispatches a block
    return box


def _body(rid: MessageId, xid: MessageId, payload: bytes) -> list[Frame]:
    return [
        frames.stream_start(rid, "a", "media:", xid=xid, seq=1),
        frames.chunk(rid, "a", 0, payload, xid=xid, seq=2),
        frames.chunk(rid, "a", 1, b"\x41z" * 3000, xid=xid, seq=3),  # large: Python's
        frames.stream_end(rid, "a", 2, xid=xid, seq=4),
        frames.log(rid, "info", "a log line", xid=xid, seq=5),  # not forwarded: Python's
        frames.end(rid, xid=xid, response=False, seq=6),
        frames.chunk(rid, "a", 3, b"\x41late", xid=xid, seq=7),  # a straggler
    ]


def _to_cartridge(use_c: bool) -> tuple[list[bytes], SeqAssigner, int]:
    """The frames of one request from the switch, through the table (``use_c``) or the
    Python path alone, onto a cartridge's outbox numbered by its own assigner."""
    switch_rid, switch_xid = MessageId(b"s" * 16), MessageId(7)
    rid, xid = MessageId(b"c" * 16), MessageId(2)
    seq = SeqAssigner()
    box = _outbox(seq)
    conn = SimpleNamespace(max_frame=MAX_FRAME, outbox=box)
    # the cartridge's REQ went first, through the numbering (seq 0)
    box.push(frames.req(rid, "cap:echo", xid=xid))
    python_calls = 0

    def python_path(frame: Frame) -> None:
        nonlocal python_calls
        python_calls += 1
        box.push(frame.replace(id=rid, routing_id=xid))

    forwards: dict[Any, Any] = {
        switch_rid: (rid, xid, seq._counters, seq._closed, seq.MAX_CLOSED, box, conn, _no_batch)
    }
    dispatch: Callable[[Frame], None] = (
        switch_dispatch(forwards, python_path) if use_c else python_path
    )
    for frame in [frames.chunk(MessageId(b"x" * 16), "a", 0, b"\x40", xid=switch_xid)]:
        dispatch(frame)  # another request's frame: not in the table, Python's
    for frame in _body(switch_rid, switch_xid, b"\x43abc"):
        dispatch(frame)
    return [bytes(b) for b in box._out], seq, python_calls


def _no_batch(other: Any) -> None:
    pass


@compiled
def test_the_table_writes_the_python_paths_bytes_toward_the_cartridge() -> None:
    c_out, c_seq, c_python = _to_cartridge(True)
    py_out, py_seq, _ = _to_cartridge(False)
    assert c_out == py_out
    assert c_seq._counters == py_seq._counters and c_seq._closed == py_seq._closed
    assert c_seq.stragglers == py_seq.stragglers == 1
    # taken in C: STREAM_START, the small CHUNK, STREAM_END, END; the rest went to Python
    assert c_python == 4


def _to_switch(use_c: bool) -> tuple[list[bytes], Any, int]:
    """A cartridge's response frames through the table's way back, or the Python path."""
    rid, xid = MessageId(b"c" * 16), MessageId(2)
    switch_rid, switch_xid = MessageId(b"s" * 16), MessageId(7)
    box = _outbox()
    end = SimpleNamespace(death=None, _flows={})
    link = SimpleNamespace(done=False, frames=0, closed=0)
    python_calls = 0

    def close() -> None:
        link.closed += 1
        link.done = True

    def python_path(frame: Frame) -> None:
        nonlocal python_calls
        python_calls += 1
        if link.done:
            return  # a straggler: the link counts it
        link.frames += 1
        box.push(frame.replace(id=switch_rid, routing_id=switch_xid))
        if frame.frame_type is FrameType.END:
            close()

    route = (link, switch_rid, switch_xid, end, box, _no_batch, MAX_FRAME, python_path, close)
    forward = switch_forwarder(route) if use_c else python_path
    assert forward is not None
    for frame in _body(rid, xid, b"\x43abc"):
        forward(frame)
    return [bytes(b) for b in box._out], link, python_calls


@compiled
def test_the_table_writes_the_python_paths_bytes_toward_the_switch() -> None:
    c_out, c_link, c_python = _to_switch(True)
    py_out, py_link, _ = _to_switch(False)
    assert c_out == py_out
    assert c_link.frames == py_link.frames == 6  # the activity watch sees every frame
    assert c_link.closed == py_link.closed == 1  # the END ended the link, once
    assert c_python == 3  # the large CHUNK, the LOG, and the straggler after the END


@compiled
def test_the_table_leaves_a_frame_to_python_when_the_outbox_is_not_held() -> None:
    rid, xid = MessageId(b"c" * 16), MessageId(2)
    seq = SeqAssigner()
    box = FrameOutbox(None, lambda: MAX_FRAME, number=seq.number)  # not held: no block
    conn = SimpleNamespace(max_frame=MAX_FRAME, outbox=box)
    switch_rid = MessageId(b"s" * 16)
    taken: list[Frame] = []
    forwards: dict[Any, Any] = {
        switch_rid: (rid, xid, seq._counters, seq._closed, seq.MAX_CLOSED, box, conn, _no_batch)
    }
    dispatch = switch_dispatch(forwards, taken.append)
    frame = frames.stream_start(switch_rid, "a", "media:", xid=MessageId(7))
    dispatch(frame)
    assert taken == [frame] and not box._out and not seq._counters


def _session(pure: bool, sock_dir: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CARTRIDGE_RUNTIME_PURE_PYTHON"}
    if pure:
        env["CARTRIDGE_RUNTIME_PURE_PYTHON"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(HERE / "_forward_session.py"), str(sock_dir / f"p{int(pure)}.sock")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_host_answers_with_the_same_bytes_compiled_and_in_pure_python(sock_dir: Path) -> None:
    compiled_run = _session(False, sock_dir)
    pure_run = _session(True, sock_dir)
    built = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
    assert compiled_run.splitlines()[0] == f"compiled {built}"
    assert pure_run.splitlines()[0] == "compiled False"
    assert compiled_run.splitlines()[1:] == pure_run.splitlines()[1:]
    assert len(compiled_run.splitlines()) > 12  # four requests' answers, frame by frame
