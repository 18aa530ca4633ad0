"""Cancel ordering and the cancel grace: a cancel never overtakes its REQ and never hangs."""

from __future__ import annotations

import anyio
import pytest
from _engine_helpers import RAW, raw_env

from cartridge_runtime.engine import CallError, Engine

BYTES = "media:"


async def _held():  # type: ignore[no-untyped-def]
    """An input that sends one piece and then never ends (only a cancel ends its call)."""
    yield b"x"
    await anyio.sleep_forever()


async def _cancel_right_after_open(e: Engine, rounds: int) -> tuple[int, int]:
    """Open calls and cancel each one at once (after 0-3 scheduler turns), ``rounds`` times;
    returns (cancelled, completed). Each call must end: a lost cancel would hang here."""
    cancelled = completed = 0
    for i in range(rounds):
        value = _held() if i % 2 else b"payload %d" % i
        async with e.call("cap:echo", [(BYTES, value)]) as response:
            for _ in range(i % 4):
                await anyio.lowlevel.checkpoint()
            await response.cancel()
            try:
                result = await response.collect()
            except CallError as exc:
                assert exc.code == "CANCELLED" and exc.attribution_class == "user", exc
                # Answered by the cartridge, not given up on after the grace: a CANCEL that
                # overtook its REQ would be dropped by the cartridge and end up here.
                assert "did not confirm" not in exc.message, exc
                cancelled += 1
            else:
                assert result.data == b"payload %d" % i  # the echo won the race: fine
                completed += 1
    return cancelled, completed


@pytest.mark.asyncio
async def test_cancel_immediately_after_open_never_overtakes_the_req() -> None:
    # The regression: the REQ used to leave from a separately started task, so a cancel made
    # right after opening could reach the cartridge first; the cartridge dropped the CANCEL of
    # an unknown request, then served the REQ, and the call waited forever. The REQ (and a
    # small body) is now queued when the call opens, so every cancel here is answered by the
    # cartridge itself (the grace is long, so a lost cancel cannot pass as answered).
    async with Engine(cancel_grace=5.0) as e:
        e.add_cartridge(RAW, env=raw_env("echo"), known_caps=["cap:echo"])
        with anyio.fail_after(60):  # a hang guard only; the rounds finish in well under that
            cancelled, completed = await _cancel_right_after_open(e, 200)
        assert cancelled >= 100  # every never-ending call was cancelled by the cartridge
        assert cancelled + completed == 200
        assert (await e.call_bytes("cap:echo", [(BYTES, b"after")])).data == b"after"
        stats = e.stats()
        assert stats.protocol_errors == 0 and stats.no_route == 0
        status = e.status()[0]
        assert status.starts == 1 and status.in_flight == 0


def test_cancel_immediately_after_open_under_trio() -> None:
    async def main() -> None:
        async with Engine(cancel_grace=5.0) as e:
            e.add_cartridge(RAW, env=raw_env("echo"), known_caps=["cap:echo"])
            with anyio.fail_after(60):
                cancelled, completed = await _cancel_right_after_open(e, 60)
            assert cancelled >= 30 and cancelled + completed == 60
            assert e.stats().protocol_errors == 0 and e.stats().no_route == 0

    anyio.run(main, backend="trio")


@pytest.mark.asyncio
async def test_cancel_before_anything_left_fails_locally() -> None:
    async with Engine() as e:
        name = e.add_cartridge(RAW, env=raw_env("echo"), known_caps=["cap:echo"])
        await e.start(name)
        conn = e._slots[name].replicas[0].conn  # white-box: keep the call's frames in the queue
        assert conn is not None
        conn.hold()
        try:
            async with e.call("cap:echo", [(BYTES, b"never sent")]) as response:
                await response.cancel()
                with pytest.raises(CallError) as info:
                    await response.collect()
        finally:
            conn.release()
        assert info.value.code == "CANCELLED" and "before it was sent" in info.value.message
        assert conn.gate.active == 0
        # The cartridge never heard of that call: nothing late, nothing unroutable.
        assert (await e.call_bytes("cap:echo", [(BYTES, b"next")])).data == b"next"
        stats = e.stats()
        assert stats.stragglers == 0 and stats.no_route == 0 and stats.protocol_errors == 0


@pytest.mark.asyncio
async def test_plain_cancel_unanswered_fails_after_the_grace() -> None:
    # "stubborn" ignores CANCEL: a plain cancel fails the call locally after cancel_grace
    # (the process is not killed), and frees its pool slot.
    async with Engine(cancel_grace=0.2) as e:
        name = e.add_cartridge(RAW, env=raw_env("stubborn"), known_caps=["cap:echo"])
        with anyio.fail_after(30):
            async with e.call("cap:echo", [(BYTES, _held())]) as response:
                await response.cancel()
                with pytest.raises(CallError) as info:
                    await response.collect()
        assert info.value.code == "CANCELLED" and info.value.attribution_class == "user"
        assert "did not confirm" in info.value.message
        status = e.status()[0]
        assert status.name == name and status.state == "running" and status.starts == 1
        assert status.in_flight == 0
        conn = e._slots[name].replicas[0].conn
        assert conn is not None and conn.gate.active == 0
        assert (await e.call_bytes("cap:echo", [(BYTES, b"still")])).data == b"still"


@pytest.mark.asyncio
async def test_abandoned_call_to_a_stubborn_cartridge_releases_its_slot() -> None:
    # Leaving the block early cancels; with a cartridge that never answers, the pool slot
    # (capacity 1 here would otherwise be held forever) comes back after the grace.
    async with Engine(cancel_grace=0.2) as e:
        name = e.add_cartridge(RAW, env=raw_env("stubborn"), known_caps=["cap:echo"])
        with anyio.fail_after(30):
            async with e.call("cap:echo", [(BYTES, _held())]):
                pass
            conn = e._slots[name].replicas[0].conn
            assert conn is not None
            while conn.gate.active:  # noqa: ASYNC110 (a test waiting on engine state)
                await anyio.sleep(0.02)
        assert e.status()[0].in_flight == 0
