"""Retries: exponential backoff with jitter, only for the classes (and codes) asked for, never
for input errors nor once output reached the caller; each attempt an event, counted in the
result."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import (
    CallError,
    CallRetried,
    Engine,
    OutputData,
    OutputStarted,
    Retry,
)
from cartridge_runtime.engine._supervision._retry import retry_refusal

SCRIPT = Path(__file__).with_name("ops_cartridge.py")
BACKENDS = ["asyncio", "trio"]


def load_ops() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ops_cartridge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OPS = load_ops()


# -- the policy, without time passing ----------------------------------------------------------


def test_delays_double_up_to_the_cap_and_jitter_only_adds() -> None:
    policy = Retry(attempts=6, backoff=0.1, max_delay=0.5, jitter=0.5)
    assert [round(policy.delay(n, lambda: 0.0), 6) for n in range(1, 6)] == [
        0.1,
        0.2,
        0.4,
        0.5,
        0.5,
    ]
    assert policy.delay(1, lambda: 0.999) == pytest.approx(0.1 * 1.4995)
    assert all(policy.delay(1) >= 0.1 for _ in range(100))


def test_what_is_retried() -> None:
    policy = Retry(attempts=3)
    assert policy.covers("CARTRIDGE_DIED", "environment")
    assert policy.covers("OOM_KILLED", "resource")
    assert not policy.covers("TIMEOUT", "resource")
    assert not policy.covers("BAD_TEXT", "input")
    assert Retry(on=("environment", "resource")).covers("TIMEOUT", "resource")
    with pytest.raises(ValueError, match="never retries input failures"):
        Retry(on=("input",))
    with pytest.raises(ValueError, match="attempts must be a whole number"):
        Retry(attempts=0)


def test_why_a_failure_is_not_retried() -> None:
    policy = Retry(attempts=3)

    def why(attempt: int, code: str, cls: str, **kw: bool) -> str | None:
        args = {"output_began": False, "replayable": True} | kw
        return retry_refusal(policy, attempt, code, cls, **args)

    assert why(1, "CARTRIDGE_DIED", "environment") is None
    assert why(1, "BAD_TEXT", "input") == ""  # the first failure: nothing to add
    assert why(2, "BAD_TEXT", "input") == "not retried: a input failure"
    assert why(3, "CARTRIDGE_DIED", "environment") == "after 3 attempts"
    assert why(1, "CARTRIDGE_DIED", "environment", output_began=True) == (
        "not retried: output had already reached the caller"
    )
    assert "streamed input" in str(why(1, "CARTRIDGE_DIED", "environment", replayable=False))


# -- an engine ----------------------------------------------------------------------------------


def retried(events: Any) -> list[CallRetried]:
    return [e for e in events.pending() if isinstance(e, CallRetried)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_retries_back_off_and_give_up_after_the_attempts(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            engine.add_cartridge(SCRIPT, name="dies")
            policy = Retry(attempts=3, backoff=0.1, jitter=0.5)
            with pytest.raises(CallError) as caught:
                await engine.call(OPS.DIE, [(OPS.TEXT, b"x")], retry=policy)
            assert caught.value.code == "CARTRIDGE_DIED"
            assert caught.value.message.endswith("(after 3 attempts)")
            got = retried(events)
            assert [e.attempt for e in got] == [1, 2]
            assert got[0].delay >= 0.1 and got[1].delay >= 0.2
            assert got[1].at - got[0].at >= 0.1  # the second attempt began after the backoff
            assert all(e.code == "CARTRIDGE_DIED" for e in got)

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retry_that_succeeds_is_counted_in_the_result(backend: str, tmp_path: Path) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(SCRIPT, name="flaky")
            marker = str(tmp_path / f"marker-{backend}").encode()
            result = await engine.call(
                OPS.DIE_ONCE, [(OPS.TEXT, marker)], retry=Retry(attempts=2, backoff=0.05)
            )
            assert result.data == b"survived" and result.attempts == 2

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_errors_are_never_retried(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            engine.add_cartridge(OPS.build_runtime())
            with pytest.raises(CallError) as caught:
                await engine.call(
                    OPS.BAD_INPUT, [(OPS.TEXT, b"junk")], retry=Retry(attempts=5, backoff=0.01)
                )
            assert caught.value.code == "BAD_TEXT" and caught.value.attribution_class == "input"
            assert retried(events) == []

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_retry_once_output_reached_the_caller(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            engine.add_cartridge(SCRIPT, name="half")
            seen: list[Any] = []
            with pytest.raises(CallError) as caught:
                async with engine.call(
                    OPS.DIE_AFTER_OUTPUT, [(OPS.TEXT, b"x")], retry=Retry(attempts=3, backoff=0.01)
                ) as response:
                    async for event in response:
                        seen.append(event)
            # The output stream opened (its data may not have left the cartridge's buffer).
            assert any(isinstance(e, OutputStarted | OutputData) for e in seen)
            assert caught.value.code == "CARTRIDGE_DIED"
            assert "not retried: output had already reached the caller" in caught.value.message
            assert retried(events) == []

    anyio.run(main, backend=backend)


def test_a_streamed_input_is_not_sent_twice() -> None:
    async def main() -> None:
        async def chunks() -> Any:
            yield b"x"

        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(SCRIPT, name="dies")
            with pytest.raises(CallError, match="streamed input was consumed"):
                await engine.call(
                    OPS.DIE, [(OPS.TEXT, chunks())], retry=Retry(attempts=3, backoff=0.01)
                )

    anyio.run(main, backend="asyncio")
