"""The engine's connection as a shell over the sans-IO HostConnection: its state is the core's,
the start-up walks the core's phases, probes go through the core's bookkeeping (in process,
over memory streams)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.engine import Engine, InProcess, SpawnFailed
from cartridge_runtime.engine._connection._shell import Connection
from cartridge_runtime.engine._connection._startup import StartupFailure, run_startup
from cartridge_runtime.protocol import (
    ZERO_ID,
    ConnState,
    Frame,
    FrameType,
    HostHandshake,
    Limits,
    StartupPhase,
    StartupProgress,
    frames,
)


def connection(engine: Engine, name: str) -> Connection:
    conn = engine._slots[name].replicas[0].conn  # white-box: the shell and its core
    assert conn is not None
    return conn


@pytest.mark.asyncio
async def test_a_started_connection_is_ready_and_its_core_done() -> None:
    async with Engine(limits=Limits(max_chunk=4096), heartbeat_interval=None) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        assert conn.state is ConnState.READY and conn.ready
        assert conn.core.handshake.phase is StartupPhase.DONE
        assert conn.limits.max_chunk == 4096 and conn.max_frame == conn.limits.max_frame
        result = await engine.call(ECHO, [("media:", b"hi")])
        assert result.data == b"hi" and conn.in_flight == 0
        assert await engine.probe(name)
        assert conn.healthy and conn.last_heartbeat is not None
        await engine.stop(name)
        assert conn.state is ConnState.DEAD and conn.core.gone and conn.outbox.closed


@pytest.mark.asyncio
async def test_a_start_up_that_fails_leaves_the_core_failed(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys, time\nprint('hello there')\nsys.stdout.flush()\ntime.sleep(30)\n"
    )
    async with Engine(step_timeout=10, heartbeat_interval=None) as engine:
        name = engine.add_cartridge([sys.executable, str(script)])
        with anyio.fail_after(30), pytest.raises(SpawnFailed) as info:
            await engine.start(name)
        conn = connection(engine, name)
        assert conn.state is ConnState.FAILED
        assert conn.core.handshake.phase is StartupPhase.FAILED
        assert info.value.step == "hello"
        assert "instead of Bifaci frames" in info.value.message


class FakeLink:
    """A start-up link without IO: what the reader would see is played from the handshake."""

    def __init__(self, handshake: HostHandshake, *, end_after_policy: bool = False) -> None:
        self.handshake = handshake
        self.sent: list[Frame] = []
        self.ended = ""
        self._end_after_policy = end_after_policy

    @property
    def exit_description(self) -> str:
        return "exit status 0"

    def send(self, frame: Frame) -> None:
        self.sent.append(frame)

    async def drain(self) -> None:
        if self._end_after_policy:
            self.ended = "closed its stdout"

    async def next_startup_event(self) -> StartupProgress | None:
        hs = self.handshake
        if hs.phase is StartupPhase.HELLO:
            meta: dict[str, object] = dict(Limits().to_meta())
            meta.update(version=6, manifest=MANIFEST, pools=b"{}")
            out = hs.receive(Frame(frame_type=FrameType.HELLO, id=ZERO_ID, meta=meta))
            self.sent.extend(out)  # the shell sends the identity request as it sees HELLO
            return StartupProgress(hs.phase, frames=tuple(out))
        rid = hs.identity.rid
        chunk = next(f for f in self.sent if f.frame_type is FrameType.CHUNK)
        assert chunk.payload is not None
        for f in (
            frames.stream_start(rid, "e", "media:"),
            frames.chunk(rid, "e", 0, chunk.payload),
            frames.stream_end(rid, "e", 1),
            frames.end(rid),
        ):
            hs.receive(f)
        return StartupProgress(hs.phase)

    def end_reason(self) -> str:
        return self.ended

    async def settle_stderr(self) -> None:
        pass


MANIFEST = build_runtime().manifest.to_json_bytes()


@pytest.mark.asyncio
async def test_start_up_steps_without_io() -> None:
    hs = HostHandshake(Limits(), "offline")
    link = FakeLink(hs)
    manifest = await run_startup(link, hs, 5)
    assert not isinstance(manifest, StartupFailure)
    assert manifest.name == build_runtime().manifest.name
    assert link.sent[0].frame_type is FrameType.HELLO
    assert link.sent[-1].frame_type is FrameType.POLICY
    assert hs.phase is StartupPhase.POLICY  # the connection calls started() next


@pytest.mark.asyncio
async def test_output_ending_after_the_echo_fails_the_start_up() -> None:
    # The cartridge's output ends once the echo is in, before POLICY reached the pipe: the
    # start-up fails instead of counting a connection nobody reads from as started.
    hs = HostHandshake(Limits(), "offline")
    outcome = await run_startup(FakeLink(hs, end_after_policy=True), hs, 5)
    assert isinstance(outcome, StartupFailure)
    assert outcome.step == "policy"
    assert outcome.message == (
        "start-up step 'policy' failed: the cartridge closed its stdout (exit status 0)"
    )
    assert hs.phase is StartupPhase.FAILED
