"""The engine drives a cartridge written with the reference runtime (capdag 1.524.58)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from _engine_helpers import REFERENCE

from cartridge_runtime.engine import CallError, Engine

pytestmark = pytest.mark.interop

pytest.importorskip("capdag")

TEXT = "media:enc=utf-8"
WORDS = 'cap:in="media:enc=utf-8";out="media:enc=utf-8;list";ref-words'
FAIL = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";ref-fail'
#: Seconds per start-up step: the reference cartridge imports capdag, about half a CPU-second,
#: which a loaded machine can stretch past the default 10 s of its HELLO step.
STEP_TIMEOUT = 60.0


@pytest.mark.asyncio
async def test_reference_echo_list_and_error() -> None:
    async with Engine(step_timeout=STEP_TIMEOUT) as e:
        e.add_cartridge(REFERENCE)
        data = os.urandom(600_000)
        assert (await e.call_bytes("cap:ref-echo", [("media:", data)])).data == data

        r = await e.call_bytes(WORDS, [(TEXT, "one two three")])
        assert r.items == ["one", "two", "three"]
        assert r.main is not None and r.main.is_sequence

        with pytest.raises(CallError) as info:
            await e.call_bytes(FAIL, [(TEXT, "nope")])
        # capdag 1.524.58 flattens every handler error to HANDLER_ERROR/internal.
        assert info.value.code == "HANDLER_ERROR"
        assert "refused: nope" in info.value.message
        assert e.stats().protocol_errors == 0
        assert e.status()[0].starts == 1


@pytest.mark.asyncio
async def test_reference_cartridge_takes_a_file_input_with_its_size(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(300_000))
    async with Engine(step_timeout=STEP_TIMEOUT) as e:
        e.add_cartridge(REFERENCE)
        result = await e.call_bytes("cap:ref-echo", [("media:", data)])
        assert result.data == data.read_bytes()
        assert e.stats().protocol_errors == 0


def test_reference_on_trio() -> None:
    async def main() -> None:
        async with Engine(step_timeout=STEP_TIMEOUT) as e:
            e.add_cartridge(REFERENCE)
            assert (await e.call_bytes("cap:ref-echo", [("media:", b"trio")])).data == b"trio"

    anyio.run(main, backend="trio")
