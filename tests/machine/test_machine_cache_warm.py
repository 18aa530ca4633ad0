"""A warm run's fixed costs: a cartridge's identity is hashed once per command, manifest and
file state (not once per run), and a run's input file is read without a worker thread while
the page cache holds it; the values are the same either way."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine._machines import _cache_step, _inputs
from cartridge_runtime.engine._machines._node_stream import NodeStream


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []
    real = _cache_step.cartridge_identity

    def counting(command: tuple[str, ...], manifest_json: bytes) -> str:
        calls.append(command)
        return real(command, manifest_json)

    monkeypatch.setattr(_cache_step, "cartridge_identity", counting)
    monkeypatch.setattr(_cache_step, "_IDENTITIES", {})
    return calls


@pytest.mark.asyncio
async def test_an_identity_is_hashed_once_while_its_files_are_unchanged(
    tmp_path: Path, hashed: list[tuple[str, ...]]
) -> None:
    script = tmp_path / "c.py"
    script.write_text("print('one')\n")
    command = ("python3", str(script))
    first = await _cache_step._known_identity(command, b"{}")
    assert await _cache_step._known_identity(command, b"{}") == first
    assert hashed == [command]
    assert first == _cache_step.cartridge_identity(command, b"{}")


@pytest.mark.asyncio
async def test_a_changed_file_or_manifest_is_hashed_again(
    tmp_path: Path, hashed: list[tuple[str, ...]]
) -> None:
    script = tmp_path / "c.py"
    script.write_text("print('one')\n")
    command = ("python3", str(script))
    first = await _cache_step._known_identity(command, b"{}")
    script.write_text("print('two, longer')\n")
    second = await _cache_step._known_identity(command, b"{}")
    assert second != first
    other = await _cache_step._known_identity(command, b'{"v":2}')
    assert other not in (first, second)
    assert len(hashed) == 3


@pytest.mark.asyncio
async def test_the_memo_is_bounded(hashed: list[tuple[str, ...]]) -> None:
    for n in range(_cache_step._IDENTITIES_MAX + 5):
        await _cache_step._known_identity(("no-such-word", str(n)), b"{}")
    assert len(_cache_step._IDENTITIES) == _cache_step._IDENTITIES_MAX


async def _fed(path: Path) -> list[bytes]:
    flow = NodeStream("doc")
    reader = flow.reader()
    pieces: list[bytes] = []

    async def read() -> None:
        assert await reader.present()
        pieces.extend([bytes(piece) async for piece in reader.pieces()])

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await _inputs.feed_input(flow, path)
    return pieces


@pytest.mark.asyncio
async def test_an_input_file_is_fed_in_pieces_byte_for_byte(tmp_path: Path) -> None:
    data = os.urandom(3 * _inputs.PIECE + 11 + (1 << 20))
    (tmp_path / "doc").write_bytes(data)
    pieces = await _fed(tmp_path / "doc")
    assert b"".join(pieces) == data
    assert {len(p) for p in pieces[:-1]} == {_inputs.PIECE}


@pytest.mark.asyncio
async def test_an_empty_input_file_is_present_and_empty(tmp_path: Path) -> None:
    (tmp_path / "doc").write_bytes(b"")
    assert await _fed(tmp_path / "doc") == []
