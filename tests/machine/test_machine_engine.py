"""``Engine.machine``: machine notation resolved against the caps of the engine's cartridges
(the bundled ones), started only to read their manifests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import pytest

from cartridge_runtime.engine import Engine, EngineError, SpawnFailed
from cartridge_runtime.machine import (
    MachineError,
    MachineReferenceWithoutSourceError,
    MappingMachineSource,
    UnknownCapError,
    parse_machine,
)

ROOT: Final = Path(__file__).resolve().parents[2]
CARTRIDGES: Final = ROOT / "cartridges"
META: Final = (
    'meta cap:in="media:ext=md;markdown";op=metadata;out="media:fmt=json;record;text-metadata"'
)
QUERY: Final = 'query cap:in="media:fmt=json";op=query;out="media:fmt=json;json-match;list"'
OUTLINE: Final = (
    'outline cap:in="media:ext=md;markdown";op=outline;out="media:enc=utf-8;list;markdown-heading"'
)
#: One machine across two cartridges (text and jsonkit), with a constant and a named output.
ACROSS: Final = "\n".join(
    [META, QUERY, OUTLINE, "doc -> meta -> m", '(m, path="$.words") -> query -> (matches=hits, stats=st)',
     "doc -> outline -> heads"]
)  # fmt: skip


def _engine() -> Engine:
    engine = Engine()
    for name in ("text", "jsonkit", "archive"):
        engine.add_cartridge(CARTRIDGES / f"{name}.py")
    return engine


@pytest.mark.asyncio
async def test_a_machine_across_cartridges() -> None:
    async with _engine() as engine:
        assert {s.state for s in engine.status()} == {"stopped"}
        machine = await engine.machine(ACROSS)
        # Started to read their manifests, and no call made.
        status = engine.status()
        assert {s.state for s in status} == {"running"}
        assert all(s.in_flight == 0 and s.starts == 1 for s in status)
        caps = [cap for s in engine.status() for cap in engine.manifest(s.name).all_caps()]
    assert [step.label for step in machine.steps] == ["outline", "meta", "query"]
    assert [n.label for n in machine.inputs] == ["doc"]
    assert sorted(n.label or "" for n in machine.outputs) == ["heads", "hits", "st"]
    query = machine.step("query")
    assert [(b.arg, b.constant) for b in query.bindings if b.is_constant] == [("path", "$.words")]
    # The same machine as parse_machine makes from the same caps.
    assert machine == parse_machine(ACROSS, caps)
    assert machine.to_notation() == parse_machine(ACROSS, caps).to_notation()


@pytest.mark.asyncio
async def test_a_machine_file_and_its_includes(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "meta.machine").write_text(f"{META}\n{QUERY}\n"
        'doc -> meta -> m\n(m, path="$.title") -> query -> (matches=hits)')  # fmt: skip
    main = tmp_path / "main.machine"
    main.write_text('sub machine "lib/meta.machine"\n(doc=readme) -> sub -> (hits=found)')
    async with _engine() as engine:
        machine = await engine.machine(main)
    assert [s.included_as for s in machine.steps] == [("sub#1",), ("sub#1",)]
    assert [n.label for n in machine.outputs] == ["found"]


@pytest.mark.asyncio
async def test_text_is_read_with_no_machine_source_unless_given() -> None:
    text = 'sub machine "m"\n(doc=x) -> sub -> y'
    async with _engine() as engine:
        with pytest.raises(MachineReferenceWithoutSourceError):
            await engine.machine(text)
        source = MappingMachineSource({"m": f"{OUTLINE}\ndoc -> outline -> h"})
        machine = await engine.machine(text, source=source)
    assert len(machine.steps) == 1


@pytest.mark.asyncio
async def test_a_cap_no_cartridge_declares() -> None:
    text = 'w cap:in="media:enc=utf-8";op=nowhere;out="media:enc=utf-8"\na -> w -> b'
    async with _engine() as engine:
        with pytest.raises(UnknownCapError) as caught:
            await engine.machine(text)
    assert isinstance(caught.value, MachineError) and caught.value.line == 2


@pytest.mark.asyncio
async def test_a_machine_file_that_cannot_be_read(tmp_path: Path) -> None:
    async with _engine() as engine:
        with pytest.raises(EngineError) as caught:
            await engine.machine(tmp_path / "missing.machine")
    assert "missing.machine" in str(caught.value)


@pytest.mark.asyncio
async def test_a_cartridge_that_does_not_start(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nsys.exit(3)\n")
    async with _engine() as engine:
        engine.add_cartridge([sys.executable, str(broken)])
        with pytest.raises(SpawnFailed):
            await engine.machine(ACROSS)
