"""The engine drives cartridges/interop.py: every cap, concurrency, size, cancel, kill, peers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal

import anyio
import pytest
from _engine_helpers import INTEROP, interop_caps

from cartridge_runtime.engine import (
    CallError,
    CartridgeDied,
    Engine,
    OutputData,
    OutputStarted,
)

BYTES = "media:"
TEXT = "media:enc=utf-8"
JSON = "media:fmt=json;record"


def cap(alias: str) -> str:
    return interop_caps()[alias]


def engine(**kw: object) -> Engine:
    e = Engine(**kw)  # type: ignore[arg-type]
    e.add_cartridge(INTEROP)
    return e


@pytest.mark.asyncio
async def test_echo_and_lazy_start() -> None:
    async with engine() as e:
        assert e.status()[0].state == "stopped"
        result = await e.call_bytes(cap("echo"), [(BYTES, b"hello engine")])
        assert result.data == b"hello engine"
        assert result.end_meta is not None and result.end_meta["exit_code"] == 0
        status = e.status()[0]
        assert status.state == "running" and status.pid is not None and status.healthy
        assert cap("echo") in status.caps


@pytest.mark.asyncio
async def test_every_interop_cap(tmp_path: os.PathLike[str]) -> None:
    async with engine() as e:
        r = await e.call_bytes(cap("double"), [(JSON, b'{"value": 21}')])
        assert json.loads(r.data) == 42

        r = await e.call_bytes(cap("words"), [(TEXT, "the quick  brown fox")])
        assert r.items == [b"the", b"quick", b"brown", b"fox"]  # text items: UTF-8 bytes
        assert r.main is not None and r.main.is_sequence

        r = await e.call_bytes(cap("progress"), [(JSON, b'{"steps": 4}')])
        assert [round(p.progress, 2) for p in r.progress] == [0.0, 0.25, 0.5, 0.75]
        assert [log.message for log in r.logs] == [f"did step {i}" for i in range(1, 5)]
        assert r.data == b"completed"

        with pytest.raises(CallError) as info:
            await e.call_bytes(cap("fail"), [(TEXT, "please")])
        assert info.value.code == "INTEROP_FAIL"
        assert info.value.attribution_class == "input"
        assert "please" in info.value.message
        assert not info.value.retryable

        r = await e.call_bytes(cap("generate"), [(JSON, b'{"size": 100000}')])
        assert r.data == (b"ABCDEFGH" * 12500)

        payload = os.urandom(300_000)
        r = await e.call_bytes(cap("sha256"), [(BYTES, payload)])
        assert r.data.decode() == hashlib.sha256(payload).hexdigest()

        r = await e.call_bytes(cap("split"), [(TEXT, "héllo")])
        assert r.data.decode() == "HÉLLO"
        stats = r.output(JSON)
        assert stats is not None and json.loads(stats.data) == {"length": 5}
        assert len(r.outputs) == 2

        r = await e.call_bytes(cap("peer-echo"), [(BYTES, b"via a peer")])
        assert r.data == b"via a peer"

        r = await e.call_bytes(cap("sleep"), [(JSON, b'{"ms": 10}')])
        assert r.data == b"slept-10"

        r = await e.call_bytes(
            cap("concat"), [(TEXT, "left"), ("media:enc=utf-8;suffix", "-right")]
        )
        assert r.data == b"left-right"

        path = anyio.Path(tmp_path) / "blob.bin"
        blob = os.urandom(70_000)
        await path.write_bytes(blob)
        r = await e.call_bytes(cap("file-info"), [(BYTES, path)])
        assert json.loads(r.data) == {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}

        r = await e.call_bytes("cap:effect=none", [(BYTES, b"identity")])
        assert r.data == b"identity"


@pytest.mark.asyncio
async def test_events_arrive_in_order() -> None:
    async with engine() as e:
        async with e.call(cap("progress"), [(JSON, b'{"steps": 2}')]) as response:
            kinds = [type(ev).__name__ async for ev in response]
        assert kinds.count("Progress") == 2 and kinds.count("Log") == 2
        assert kinds.index("OutputStarted") > kinds.index("Log")
        assert kinds[-1] == "OutputEnded"
        assert response.end_meta is not None


@pytest.mark.asyncio
async def test_async_iterable_and_sequence_inputs() -> None:
    async def pieces():  # type: ignore[no-untyped-def]
        for i in range(50):
            yield f"piece-{i};".encode()

    async with engine() as e:
        r = await e.call_bytes(cap("echo"), [(BYTES, pieces())])
        assert r.data == b"".join(f"piece-{i};".encode() for i in range(50))


@pytest.mark.asyncio
async def test_32_concurrent_calls() -> None:
    async with engine() as e:
        results: dict[int, bytes] = {}

        async def one(i: int) -> None:
            payload = f"call {i} ".encode() * (i * 100 + 1)
            r = await e.call_bytes(cap("echo"), [(BYTES, payload)])
            results[i] = r.data
            assert r.data == payload

        async with anyio.create_task_group() as tg:
            for i in range(32):
                tg.start_soon(one, i)
        assert len(results) == 32
        assert e.status()[0].starts == 1


@pytest.mark.slow
@pytest.mark.asyncio
async def test_64_mib_echo_byte_for_byte() -> None:
    data = os.urandom(1 << 20) * 64
    async with engine() as e:
        received = 0
        digest = hashlib.sha256()
        async with e.call(cap("echo"), [(BYTES, data)]) as response:
            async for ev in response:
                if isinstance(ev, OutputData):
                    assert data[received : received + len(ev.value)] == ev.value
                    received += len(ev.value)
                    digest.update(ev.value)
        assert received == len(data)
        assert digest.digest() == hashlib.sha256(data).digest()


@pytest.mark.asyncio
async def test_cancel_mid_stream_then_next_call_works() -> None:
    async with engine() as e:
        async with e.call(cap("generate"), [(JSON, b'{"size": 200000000}')]) as response:
            got = 0
            with pytest.raises(CallError) as info:
                async for ev in response:
                    if isinstance(ev, OutputData):
                        got += len(ev.value)
                        if got > 1_000_000:
                            await response.cancel()
        assert info.value.code == "CANCELLED"
        assert info.value.attribution_class == "user"
        assert got < 200_000_000
        r = await e.call_bytes(cap("echo"), [(BYTES, b"still alive")])
        assert r.data == b"still alive"
        assert e.status()[0].starts == 1


@pytest.mark.asyncio
async def test_leaving_the_block_cancels() -> None:
    async with engine() as e:
        async with e.call(cap("sleep"), [(JSON, b'{"ms": 60000}')]):
            pass
        r = await e.call_bytes(cap("double"), [(JSON, b'{"value": 1}')])
        assert json.loads(r.data) == 2


@pytest.mark.asyncio
async def test_sigkill_mid_stream_fails_calls_then_respawns() -> None:
    async with engine() as e:
        async with e.call(cap("generate"), [(JSON, b'{"size": 500000000}')]) as response:
            killed = False
            with pytest.raises(CartridgeDied) as info:
                async for ev in response:
                    # Kill once: data already buffered after the kill still arrives as
                    # events, and a second kill would find the process gone.
                    if isinstance(ev, OutputData) and not killed:
                        killed = True
                        pid = e.status()[0].pid
                        assert pid is not None
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
        err = info.value
        assert err.code == "CARTRIDGE_DIED" and err.attribution_class == "environment"
        assert "SIGKILL" in err.message
        assert err.returncode == -signal.SIGKILL
        assert e.status()[0].state == "dead"
        r = await e.call_bytes(cap("echo"), [(BYTES, b"respawned")])
        assert r.data == b"respawned"
        assert e.status()[0].starts == 2
        assert e.stats().respawns == 1


@pytest.mark.asyncio
async def test_death_fails_every_pending_call_but_not_other_cartridges() -> None:
    async with Engine() as e:
        first = e.add_cartridge(INTEROP)
        e.add_cartridge(
            INTEROP
        )  # a second copy: its caps lose the tie, so we call it by killing the first
        await e.start(first)
        errors: list[CallError] = []

        async def sleeper() -> None:
            try:
                await e.call_bytes(cap("sleep"), [(JSON, b'{"ms": 30000}')])
            except CallError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(sleeper)
            while e.status()[0].in_flight < 3:  # noqa: ASYNC110 (a test waiting on engine state)
                await anyio.sleep(0.01)
            e.kill(first)
        assert len(errors) == 3 and all(isinstance(x, CartridgeDied) for x in errors)
        assert e.route(cap("echo")) == first


@pytest.mark.asyncio
async def test_streaming_events_report_outputs() -> None:
    async with engine() as e:
        async with e.call(cap("split"), [(TEXT, "abc")]) as response:
            started = [ev async for ev in response if isinstance(ev, OutputStarted)]
        names = {ev.output for ev in started}
        assert None in names and len(names) == 2


@pytest.mark.asyncio
async def test_unknown_cap_is_no_route() -> None:
    async with engine() as e:
        with pytest.raises(CallError) as info:
            await e.call_bytes("cap:no-such-thing", [(BYTES, b"")])
        assert info.value.code == "NO_HANDLER"
        assert e.stats().no_route == 1


@pytest.mark.asyncio
async def test_known_caps_route_before_start() -> None:
    async with Engine() as e:
        name = e.add_cartridge(INTEROP, known_caps=[cap("echo")])
        assert e.route(cap("echo")) == name
        assert e.status()[0].state == "stopped"
        assert (await e.call_bytes(cap("echo"), [(BYTES, b"k")])).data == b"k"


@pytest.mark.asyncio
async def test_heartbeat_probe_reports_healthy() -> None:
    async with engine(heartbeat_interval=0.05) as e:
        await e.call_bytes(cap("echo"), [(BYTES, b"x")])
        assert await e.probe("interop")
        status = e.status()[0]
        assert status.healthy and status.last_heartbeat is not None
        assert "drops_total" in status.remote_stats


def test_trio_backend_echo_words_and_peer() -> None:
    async def main() -> None:
        async with engine() as e:
            assert (await e.call_bytes(cap("echo"), [(BYTES, b"trio")])).data == b"trio"
            assert (await e.call_bytes(cap("words"), [(TEXT, "a b")])).items == [b"a", b"b"]
            assert (await e.call_bytes(cap("peer-echo"), [(BYTES, b"p")])).data == b"p"

    anyio.run(main, backend="trio")


def test_trio_backend_kill_and_respawn() -> None:
    async def main() -> None:
        async with engine() as e:
            await e.start("interop")
            with pytest.raises(CartridgeDied):
                async with e.call(cap("sleep"), [(JSON, b'{"ms": 30000}')]) as response:
                    e.kill("interop")
                    await response.collect()
            assert (await e.call_bytes(cap("echo"), [(BYTES, b"again")])).data == b"again"

    anyio.run(main, backend="trio")


@pytest.mark.asyncio
async def test_peer_call_routed_to_another_cartridge() -> None:
    from _engine_helpers import RAW, raw_env

    async with Engine() as e:
        # Added first, the raw fixture wins the cap:echo tie; interop's peer-echo therefore
        # reaches cap:echo in the *other* process, through the engine.
        raw = e.add_cartridge(RAW, env=raw_env("echo"), known_caps=["cap:echo"])
        e.add_cartridge(INTEROP, known_caps=[cap("peer-echo")])
        assert e.route(cap("echo")) == raw
        payload = os.urandom(700_000)
        r = await e.call_bytes(cap("peer-echo"), [(BYTES, payload)])
        assert r.data == payload
        states = {s.name: s for s in e.status()}
        assert states[raw].starts == 1 and states["interop"].starts == 1
        assert e.stats().protocol_errors == 0


@pytest.mark.asyncio
async def test_cancel_with_force_kill_kills_an_unresponsive_cartridge() -> None:
    from _engine_helpers import RAW, raw_env

    async def held():  # type: ignore[no-untyped-def]
        yield b"x"
        await anyio.sleep_forever()

    async with Engine(cancel_grace=0.2) as e:
        # "stubborn" ignores CANCEL: force_kill kills it after the grace, the call still ends
        # as CANCELLED (not CARTRIDGE_DIED), and the next call respawns it.
        name = e.add_cartridge(RAW, env=raw_env("stubborn"), known_caps=["cap:echo"])
        async with e.call("cap:echo", [(BYTES, held())]) as response:
            await response.cancel(force_kill=True)
            with pytest.raises(CallError) as info:
                await response.collect()
        assert info.value.code == "CANCELLED" and "killed" in info.value.message
        assert e.status()[0].state == "dead"
        assert (await e.call_bytes("cap:echo", [(BYTES, b"back")])).data == b"back"
        assert e.status()[0].starts == 2 and e.status()[0].name == name


@pytest.mark.asyncio
async def test_plain_cancel_answered_by_the_cartridge() -> None:
    from _engine_helpers import RAW, raw_env

    async def held():  # type: ignore[no-untyped-def]
        yield b"x"
        await anyio.sleep_forever()

    async with Engine() as e:
        e.add_cartridge(RAW, env=raw_env("echo"), known_caps=["cap:echo"])
        async with e.call("cap:echo", [(BYTES, held())]) as response:
            await response.cancel()
            with pytest.raises(CallError) as info:
                await response.collect()
        assert info.value.code == "CANCELLED" and info.value.attribution_class == "user"
        assert e.status()[0].starts == 1


@pytest.mark.asyncio
async def test_slow_consumer_keeps_memory_bounded_by_credit() -> None:
    async with engine() as e:
        async with e.call(cap("generate"), [(JSON, b'{"size": 8000000}')]) as response:
            state = response._state  # white-box: the engine-side event queue
            window = state.conn.limits.initial_credit
            peak = 0
            total = 0
            async for ev in response:
                peak = max(peak, len(state.events))
                if isinstance(ev, OutputData):
                    total += len(ev.value)
                    await anyio.sleep(0.001)
        assert total == 8_000_000
        assert peak <= window + 4  # never more chunks queued than the credit window allows
        assert e.stats().protocol_errors == 0


@pytest.mark.asyncio
async def test_eager_start() -> None:
    e = Engine()
    name = e.add_cartridge(INTEROP, eager=True)
    async with e:
        with anyio.fail_after(20):
            while e.status()[0].state != "running":  # noqa: ASYNC110 (a test waiting on engine state)
                await anyio.sleep(0.02)
        assert e.route(cap("echo")) == name
