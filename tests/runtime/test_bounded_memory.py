"""Bounded memory for what nobody reads: LOG floods of an unread call,
the cartridge's stderr log file, and the cartridge's open requests."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import Engine, Log
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, Request
from cartridge_runtime.testing import CartridgeHarness

FLOOD = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";flood'
NOISE = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";noise'

CARTRIDGE = textwrap.dedent(
    f"""
    import sys
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    runtime = CartridgeRuntime(Manifest.build(
        name="flood", version="1.0.0", description="t",
        caps=[CapDef.simple({FLOOD!r}, "Flood", aliases="flood"),
              CapDef.simple({NOISE!r}, "Noise", aliases="noise")],
    ))

    @runtime.op({FLOOD!r})
    async def flood(req):
        n = int(await req.take_input().require_stream_str("media:enc=utf-8"))
        for i in range(n):
            await req.log("info", f"log line number {{i}} of a flood nobody reads")
            if i % 1000 == 999:
                await req.progress(i / n, "flooding")
        await req.output().emit_cbor("done")

    @runtime.op({NOISE!r})
    async def noise(req):
        n = int(await req.take_input().require_stream_str("media:enc=utf-8"))
        for i in range(n):
            print(f"stderr line {{i:06d}} " + "x" * 100, file=sys.stderr, flush=True)
        await req.output().emit_cbor("done")

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "flood.py"
    path.write_text(CARTRIDGE)
    return path


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_log_flood_nobody_reads_stays_bounded(script: Path) -> None:
    n = 400_000
    async with Engine(heartbeat_interval=None) as e:
        e.add_cartridge(script)
        await e.call_bytes(FLOOD, [("media:enc=utf-8", "10")])  # started, warmed up
        before = _rss()
        async with e.call(FLOOD, [("media:enc=utf-8", str(n))]) as response:
            with anyio.fail_after(240):
                while not response.done:  # noqa: ASYNC110 (the caller reads nothing meanwhile)
                    await anyio.sleep(0.05)
            after = _rss()
            logs = 0
            async for ev in response:
                logs += isinstance(ev, Log)
        if before is not None and after is not None:
            assert after - before < 20 << 20, f"the engine grew by {(after - before) >> 20} MiB"
        assert response.dropped_logs > 0
        assert logs <= e.config.max_pending_logs
        # Every LOG and progress report was either kept or counted as dropped.
        assert logs + response.dropped_logs >= n


@pytest.mark.asyncio
async def test_a_collected_result_keeps_the_newest_logs_and_counts_the_rest(script: Path) -> None:
    async with Engine(max_pending_logs=100) as e:
        e.add_cartridge(script)
        result = await e.call_bytes(FLOOD, [("media:enc=utf-8", "3000")])
    assert result.data == b"done"
    assert len(result.logs) == 100
    assert result.logs[-1].message == "log line number 2999 of a flood nobody reads"
    assert len(result.logs) + len(result.progress) + result.dropped_logs == 3000 + 3


@pytest.mark.asyncio
async def test_the_stderr_log_file_is_rotated_at_its_size(script: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    async with Engine(log_dir=logs, stderr_log_max_bytes=20_000) as e:
        name = e.add_cartridge(script)
        assert (await e.call_bytes(NOISE, [("media:enc=utf-8", "2000")])).data == b"done"
        await e.stop(name)
    current = logs / f"{name}.stderr.log"
    rotated = logs / f"{name}.stderr.log.1"
    assert rotated.exists()
    assert current.stat().st_size <= 20_000 + (1 << 16)  # at most one more read block
    assert rotated.stat().st_size <= 20_000 + (1 << 16)
    assert "stderr line 001999" in current.read_text()  # the newest lines are kept


A = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";wait'


@pytest.mark.asyncio
async def test_the_cartridge_refuses_requests_past_its_cap_with_a_typed_err() -> None:
    release = anyio.Event()
    both_running = anyio.Event()
    running = [0]
    rt = CartridgeRuntime(
        Manifest.build(
            name="capped",
            version="1.0.0",
            description="t",
            caps=[CapDef.simple(A, "W", aliases="w")],
        ),
        max_open_requests=2,
    )

    @rt.op(A)
    async def wait(req: Request) -> None:
        running[0] += 1
        if running[0] == 2:
            both_running.set()
        await release.wait()
        await req.output().emit_cbor("ok")

    results: list[object] = []
    async with CartridgeHarness(rt) as h:

        async def one() -> None:
            results.append(await h.call(A, [("media:enc=utf-8", b"x")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
            await both_running.wait()
            refused = await h.call(A, [("media:enc=utf-8", b"x")])
            release.set()
        assert refused.error is not None
        assert refused.error.code == "TOO_MANY_REQUESTS"
        assert refused.error.attribution_class == "resource"
        assert all(r.error is None for r in results)  # type: ignore[attr-defined]
        assert (await h.call(A, [("media:enc=utf-8", b"x")])).error is None  # room again


def test_max_open_requests_must_be_positive() -> None:
    manifest = Manifest.build(name="c", version="1.0.0", description="t", caps=[])
    with pytest.raises(ValueError):
        CartridgeRuntime(manifest, max_open_requests=0)
