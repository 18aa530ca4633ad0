"""Engine start-up failures, health, pools, shutdown — driven by raw-frame fixture cartridges."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _engine_helpers import RAW, raw_env

from cartridge_runtime.engine import CallError, CartridgeNotFound, Engine, NoRoute, SpawnFailed

BYTES = "media:"


def raw_engine(mode: str, **kw: object) -> tuple[Engine, str]:
    e = Engine(**kw)  # type: ignore[arg-type]
    name = e.add_cartridge(RAW, env=raw_env(mode), known_caps=["cap:echo"])
    return e, name


@pytest.mark.asyncio
async def test_raw_echo_streams_both_ways() -> None:
    e, _ = raw_engine("echo")
    async with e:
        data = os.urandom(3_000_000)
        assert (await e.call_bytes("cap:echo", [(BYTES, data)])).data == data
        assert e.stats().protocol_errors == 0


@pytest.mark.asyncio
async def test_hello_timeout_is_spawn_failed_and_not_respawned() -> None:
    e, _name = raw_engine("silent", step_timeout=0.5)
    async with e:
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        err = info.value
        assert err.code == "SPAWN_FAILED" and err.attribution_class == "environment"
        assert err.step == "hello"
        assert "no answer within 0.5 s" in err.message
        # A later call fails at once with the same error: no respawn loop.
        with pytest.raises(SpawnFailed) as again:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert again.value is err
        status = e.status()[0]
        assert status.state == "failed" and status.starts == 1 and status.pid is None


@pytest.mark.asyncio
async def test_only_text_on_stdout_is_not_a_cartridge() -> None:
    # Text before the first frame is taken as a log: with no frame after it, the start-up
    # times out and the error names the text and what it suggests.
    e, _ = raw_engine("garbage", step_timeout=2.0)
    async with e:
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert info.value.step == "hello"
        assert "not a cartridge" in info.value.message
        assert "stdout: this is not a frame, just text on stdout" in info.value.message
        assert e.stats().protocol_errors == 0


@pytest.mark.asyncio
async def test_manifest_breaking_a_rule_names_the_rule() -> None:
    e, _ = raw_engine("badrule")
    async with e:
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert info.value.step == "manifest"
        assert info.value.rule == "RULE3"
        assert "RULE3" in info.value.message


@pytest.mark.asyncio
async def test_crash_before_hello_reports_exit_status_and_stderr() -> None:
    e, _ = raw_engine("crash")
    async with e:
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert "exit status 3" in info.value.message
        assert "crashing on purpose" in info.value.stderr_tail
        assert "crashing on purpose" in info.value.message


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "target",
    [
        "/nonexistent/cartridge-binary",
        "/nonexistent/cartridge.py",
        Path("/nonexistent/cartridge.py"),
        ["/nonexistent/cartridge-binary", "--flag"],
        ["no-such-command-anywhere-19"],
    ],
    ids=["executable", "script", "path", "argv", "command-name"],
)
async def test_adding_a_cartridge_that_does_not_exist_raises_at_once(target: Any) -> None:
    async with Engine() as e:
        with pytest.raises(CartridgeNotFound) as info:
            e.add_cartridge(target, known_caps=["cap:echo"])
        assert info.value.step == "spawn" and info.value.code == "SPAWN_FAILED"
        assert "no such cartridge" in info.value.message
        assert e.status() == []  # nothing was added


@pytest.mark.asyncio
async def test_an_executable_that_exists_but_cannot_start_fails_at_the_call(
    tmp_path: Path,
) -> None:
    program = tmp_path / "not-executable"
    program.write_text("#!/bin/sh\n")  # no execute bit
    async with Engine() as e:
        e.add_cartridge(program, known_caps=["cap:echo"])
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert info.value.step == "spawn"


@pytest.mark.asyncio
async def test_restart_and_retry_delay_allow_a_new_attempt() -> None:
    e, name = raw_engine("crash", spawn_retry_after=0.0)
    async with e:
        with pytest.raises(SpawnFailed):
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        with pytest.raises(SpawnFailed):
            await e.call_bytes("cap:echo", [(BYTES, b"x")])
        assert e.status()[0].starts == 2
        with pytest.raises(SpawnFailed):
            await e.restart(name)
        assert e.status()[0].starts == 3


@pytest.mark.asyncio
async def test_discovery_start_when_caps_unknown() -> None:
    async with Engine() as e:
        e.add_cartridge(RAW, env=raw_env("echo"))
        assert e.route("cap:echo") is None
        assert (await e.call_bytes("cap:echo", [(BYTES, b"d")])).data == b"d"
        with pytest.raises(NoRoute):
            await e.call_bytes("cap:other", [(BYTES, b"d")])


@pytest.mark.asyncio
async def test_unanswered_heartbeat_marks_unhealthy_without_killing() -> None:
    e, name = raw_engine("deaf", heartbeat_timeout=0.2)
    async with e:
        await e.start(name)
        assert not await e.probe(name)
        status = e.status()[0]
        assert status.state == "running" and not status.healthy
        assert e.stats().heartbeat_misses == 1
        assert (await e.call_bytes("cap:echo", [(BYTES, b"alive")])).data == b"alive"


@pytest.mark.asyncio
async def test_periodic_heartbeats_update_health() -> None:
    e, name = raw_engine("echo", heartbeat_interval=0.02)
    async with e:
        await e.start(name)
        with anyio.fail_after(5):
            while e.status()[0].last_heartbeat is None:  # noqa: ASYNC110 (a test waiting on engine state)
                await anyio.sleep(0.02)
        assert e.status()[0].healthy


@pytest.mark.asyncio
async def test_pool_capacity_one_queues_fifo() -> None:
    e, name = raw_engine("pool1")
    async with e:
        await e.start(name)
        order: list[int] = []
        release = anyio.Event()

        async def held():  # type: ignore[no-untyped-def]
            yield b"first"
            await release.wait()

        async with e.call("cap:echo", [(BYTES, held())]) as first:

            async def later(i: int) -> None:
                r = await e.call_bytes("cap:echo", [(BYTES, b"n")])
                assert r.data == b"n"
                order.append(i)

            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(later, i)
                with anyio.fail_after(5):
                    while e.status()[0].queued < 3:  # noqa: ASYNC110 (a test waiting on engine state)
                        await anyio.sleep(0.01)
                assert e.status()[0].in_flight == 1
                assert order == []
                release.set()
                assert (await first.collect()).data == b"first"
        assert order == [0, 1, 2]


@pytest.mark.asyncio
async def test_input_iterator_error_fails_the_call_only() -> None:
    async def broken():  # type: ignore[no-untyped-def]
        yield b"one"
        raise RuntimeError("producer broke")

    e, _ = raw_engine("echo")
    async with e:
        with pytest.raises(CallError) as info:
            await e.call_bytes("cap:echo", [(BYTES, broken())])
        assert info.value.code == "INVALID_REQUEST" and "producer broke" in info.value.message
        assert (await e.call_bytes("cap:echo", [(BYTES, b"ok")])).data == b"ok"


@pytest.mark.asyncio
async def test_shutdown_reaps_processes_and_writes_stderr_log() -> None:
    e, name = raw_engine("echo")
    async with e:
        await e.start(name)
        pid = e.status()[0].pid
        log_path = e.status()[0].log_path
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (non-blocking) already reaped: no zombie left behind
    assert e.status()[0].state in ("stopped", "dead")
    assert log_path.endswith(".stderr.log")


@pytest.mark.asyncio
async def test_calls_after_shutdown_are_refused() -> None:
    e, _ = raw_engine("echo")
    async with e:
        pass
    with pytest.raises(CallError):
        await e.call_bytes("cap:echo", [(BYTES, b"x")])


@pytest.mark.asyncio
async def test_bad_inputs_shape() -> None:
    async with Engine() as e:
        with pytest.raises(TypeError):
            e.call("cap:echo", [b"not a pair"])  # type: ignore[list-item]


def test_trio_startup_failure_and_echo() -> None:
    async def main() -> None:
        e, _ = raw_engine("silent", step_timeout=0.3)
        async with e:
            with pytest.raises(SpawnFailed):
                await e.call_bytes("cap:echo", [(BYTES, b"x")])
        e2, _ = raw_engine("echo")
        async with e2:
            assert (
                await e2.call_bytes("cap:echo", [(BYTES, b"t" * 500_000)])
            ).data == b"t" * 500_000

    anyio.run(main, backend="trio")


def test_sys_executable_used_for_scripts(tmp_path: Path) -> None:
    from cartridge_runtime.engine._placements._command import command_for

    script = tmp_path / "x.py"
    script.write_text("")
    assert command_for(str(script)) == [sys.executable, str(script)]
    assert command_for(sys.executable) == [sys.executable]
    assert command_for(["sh", "b"]) == ["sh", "b"]


@pytest.mark.asyncio
async def test_shutdown_fails_pending_calls_with_engine_closed() -> None:
    async def held():  # type: ignore[no-untyped-def]
        yield b"x"
        await anyio.sleep_forever()

    errors: list[CallError] = []
    e, name = raw_engine("stubborn", shutdown_grace=0.2)
    async with anyio.create_task_group() as tg, e:
        await e.start(name)

        async def pending() -> None:
            try:
                await e.call_bytes("cap:echo", [(BYTES, held())])
            except CallError as exc:
                errors.append(exc)

        tg.start_soon(pending)
        with anyio.fail_after(5):
            while e.status()[0].in_flight < 1:  # noqa: ASYNC110 (a test waiting on engine state)
                await anyio.sleep(0.01)
    assert len(errors) == 1 and errors[0].code == "CARTRIDGE_RETIRED"


@pytest.mark.asyncio
async def test_queued_calls_fail_when_the_cartridge_dies() -> None:
    async def held():  # type: ignore[no-untyped-def]
        yield b"x"
        await anyio.sleep_forever()

    e, name = raw_engine("pool1")
    errors: list[CallError] = []
    async with e:
        await e.start(name)

        async def call() -> None:
            try:
                await e.call_bytes("cap:echo", [(BYTES, held())])
            except CallError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            tg.start_soon(call)
            with anyio.fail_after(5):
                while e.status()[0].queued < 1:  # noqa: ASYNC110 (a test waiting on engine state)
                    await anyio.sleep(0.01)
            e.kill(name)
        assert len(errors) == 2 and all(x.code == "CARTRIDGE_DIED" for x in errors)
        assert (await e.call_bytes("cap:echo", [(BYTES, b"ok")])).data == b"ok"
