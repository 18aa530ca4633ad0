"""Activity timeout: a silent call is cancelled with TIMEOUT, a chatty one is not; the cap's
metadata and the call's own ``activity_timeout=`` set the limit; the judge is a pure function."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import CallStalled, CallTimeout, Engine, EngineConfig
from cartridge_runtime.engine._supervision._activity import (
    Silence,
    Verdict,
    activity_limit,
    judge_silence,
)

BACKENDS = ["asyncio", "trio"]


def load_ops() -> ModuleType:
    path = Path(__file__).with_name("ops_cartridge.py")
    spec = importlib.util.spec_from_file_location("ops_cartridge", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OPS = load_ops()


# -- the judge, without time passing ---------------------------------------------------------


def test_a_silent_call_is_warned_each_quarter_then_expires() -> None:
    record = Silence.begin(1.0, now=100.0)
    verdicts = []
    for now in (100.2, 100.25, 100.5, 100.6, 100.75, 100.99, 101.0):
        record, verdict = judge_silence(record, frames=0, unread=False, now=now)
        verdicts.append(verdict)
    assert verdicts == [
        Verdict.ACTIVE,
        Verdict.WARN,
        Verdict.WARN,
        Verdict.ACTIVE,
        Verdict.WARN,
        Verdict.ACTIVE,
        Verdict.EXPIRE,
    ]


def test_a_frame_or_unread_events_reset_the_silence() -> None:
    record = Silence.begin(1.0, now=0.0)
    record, verdict = judge_silence(record, frames=3, unread=False, now=0.9)
    assert verdict is Verdict.ACTIVE and record.since == 0.9 and record.frames == 3
    record, verdict = judge_silence(record, frames=3, unread=True, now=1.95)
    assert verdict is Verdict.ACTIVE and record.since == 1.95
    _, verdict = judge_silence(record, frames=3, unread=False, now=2.95)
    assert verdict is Verdict.EXPIRE


def test_the_next_look_is_each_quarter_after_the_last_activity() -> None:
    record = Silence.begin(2.0, now=10.0)
    assert record.next_look == 10.5
    record, _ = judge_silence(record, frames=0, unread=False, now=10.5)
    assert record.warned == 1 and record.next_look == 11.0


def test_the_limit_is_the_calls_then_the_caps_then_the_engines() -> None:
    meta = {"activity_timeout_secs": "7.5"}
    assert activity_limit(2.0, meta, 120.0) == 2.0
    assert activity_limit(None, meta, 120.0) == 7.5
    assert activity_limit(None, {}, 120.0) == 120.0
    assert activity_limit(None, None, None) is None
    assert activity_limit(math.inf, meta, 120.0) is None
    with pytest.raises(ValueError, match="activity_timeout_secs must be a positive number"):
        activity_limit(None, {"activity_timeout_secs": "-1"}, 120.0)
    with pytest.raises(ValueError, match="must be a number of seconds, not 'soon'"):
        activity_limit(None, {"activity_timeout_secs": "soon"}, 120.0)


# -- an engine --------------------------------------------------------------------------------


def run(backend: str, main: Any) -> None:
    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_silent_handler_times_out_while_a_chatty_one_finishes(backend: str) -> None:
    async def main() -> None:
        # A limit of 1 s: the handlers run in this process, and a loaded machine can stall it
        # for a few tenths of a second, which the judge would take for the chatty one's silence.
        config = EngineConfig(activity_timeout=1.0, heartbeat_interval=None)
        async with Engine(config) as engine, engine.subscribe() as events:
            engine.add_cartridge(OPS.build_runtime())
            chatty_result: list[Any] = []

            async def chatty() -> None:
                chatty_result.append(await engine.call(OPS.CHATTY, [(OPS.TEXT, b"1.5")]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(chatty)
                with pytest.raises(CallTimeout) as caught:
                    await engine.call(OPS.SILENT, [(OPS.TEXT, b"x")])
            error = caught.value
            assert error.code == "TIMEOUT" and error.attribution_class == "resource"
            assert "no activity for 1 s" in error.message
            assert chatty_result[0].data == b"done"  # 1.5 s of work, never 1 s silent
            stalled = [e for e in events.pending() if isinstance(e, CallStalled)]
            # The silent call was warned about (a loaded machine may warn about the chatty
            # one too, a quarter of the limit between two of its frames: not a timeout).
            silent = [e for e in stalled if e.cap == OPS.SILENT]
            assert silent and all(e.limit == 1.0 and e.silent_for >= 0.25 for e in silent)
            # The connection is still serving: the timeout cancelled one call only.
            again = await engine.call(OPS.ECHO, [(OPS.TEXT, b"alive")])
            assert again.data == b"alive"

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_caps_metadata_sets_its_activity_timeout(backend: str) -> None:
    async def main() -> None:
        # The engine's default would wait two minutes; the cap says 0.2 s.
        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(OPS.build_runtime())
            with pytest.raises(CallTimeout, match=r"no activity for 0\.2 s"):
                await engine.call(OPS.QUICK_SILENT, [(OPS.TEXT, b"x")])

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_calls_own_activity_timeout_wins(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None, activity_timeout=None) as engine:
            engine.add_cartridge(OPS.build_runtime())
            with pytest.raises(CallTimeout, match=r"no activity for 0\.25 s"):
                await engine.call(OPS.QUICK_SILENT, [(OPS.TEXT, b"x")], activity_timeout=0.25)
            with pytest.raises(ValueError, match="activity_timeout must be a positive"):
                engine.call(OPS.ECHO, [(OPS.TEXT, b"x")], activity_timeout=0)

    run(backend, main)


def test_a_caller_that_does_not_read_is_not_the_cartridges_silence() -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None, activity_timeout=0.2) as engine:
            engine.add_cartridge(OPS.build_runtime())
            async with engine.call(OPS.ECHO, [(OPS.TEXT, b"unread")]) as response:
                await anyio.sleep(0.6)  # the answer waits, unread, for three limits
                result = await response.collect()
            assert result.data == b"unread"

    run("asyncio", main)


def test_the_cartridges_activity_timeout_wins_over_its_caps() -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None, activity_timeout=None) as engine:
            name = engine.add_cartridge(OPS.build_runtime(), activity_timeout=0.3)
            assert engine.status()[0].activity_timeout == 0.3
            with pytest.raises(CallTimeout, match=r"no activity for 0\.3 s"):
                await engine.call(OPS.QUICK_SILENT, [(OPS.TEXT, b"x")])
            with pytest.raises(CallTimeout, match=r"no activity for 0\.1 s"):
                await engine.call(OPS.SILENT, [(OPS.TEXT, b"x")], activity_timeout=0.1)
            assert name == "ops"

    run("trio", main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_short_limit_after_a_watched_call_is_not_held_to_the_defaults_quarter(
    backend: str,
) -> None:
    async def main() -> None:
        # Under the two-minute default the watchdog looks every 30 s; a later call's 0.3 s
        # (its own, or its cap's 0.2 s) must bring the next look forward, not wait for it.
        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(OPS.build_runtime())
            assert (await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])).data == b"x"
            with anyio.fail_after(10), pytest.raises(CallTimeout, match=r"for 0\.3 s"):
                await engine.call(OPS.SILENT, [(OPS.TEXT, b"x")], activity_timeout=0.3)

        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(OPS.build_runtime())
            assert (await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])).data == b"x"
            with anyio.fail_after(10), pytest.raises(CallTimeout, match=r"for 0\.2 s"):
                await engine.call(OPS.QUICK_SILENT, [(OPS.TEXT, b"x")])

    run(backend, main)
