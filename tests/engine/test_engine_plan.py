"""``Engine.plan``: from a media URN, a file or bytes to ranked plans over the caps of the
engine's cartridges; a manifest known ahead plans without starting anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cartridge_runtime.engine import Engine
from cartridge_runtime.errors import DefinitionError
from cartridge_runtime.planner import InputNotFound, PlannerError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "planner"))
from test_planner_engine import LOUD, TEXT, word_runtime


@pytest.mark.asyncio
async def test_a_media_urn_plans_and_the_best_plan_runs() -> None:
    async with Engine() as engine:
        engine.add_cartridge(word_runtime())
        plans = await engine.plan(TEXT, LOUD)
        assert [p.description for p in plans][:1] == ["split → ForEach → shout"]
        result = await engine.run_machine(plans[0].machine, {"n0": "a b"})
    (output,) = result.outputs.values()
    assert [item.value for item in output.items] == [b"A!", b"B!"]


@pytest.mark.asyncio
async def test_a_file_is_detected_and_planned_from(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("plain words here\n")
    async with Engine() as engine:
        engine.add_cartridge(word_runtime())
        plans = await engine.plan(note, LOUD)
        assert plans and str(plans[0].source).startswith("media:")
        assert plans[0].steps[0].cap is not None and "split" in str(plans[0].steps[0].cap)
        none = await engine.plan("media:pdf", LOUD)
    assert none == []


@pytest.mark.asyncio
async def test_bytes_need_their_media_and_bad_queries_are_typed(tmp_path: Path) -> None:
    async with Engine() as engine:
        engine.add_cartridge(word_runtime())
        with pytest.raises(DefinitionError, match="media="):
            await engine.plan(b"hello", LOUD)
        assert await engine.plan(b"hello", LOUD, media=TEXT)
        with pytest.raises(InputNotFound):
            await engine.plan(tmp_path / "missing.txt", LOUD)
        with pytest.raises(PlannerError):
            await engine.plan(TEXT, "not a media urn")
        with pytest.raises(PlannerError):
            await engine.plan(TEXT, LOUD, max_depth=2.5)  # type: ignore[arg-type]
        # a depth of zero searches nothing: no plan, as the reference answers (PLAN-21)
        assert await engine.plan(TEXT, LOUD, max_depth=0) == []


@pytest.mark.asyncio
async def test_a_known_manifest_plans_without_a_start() -> None:
    runtime = word_runtime()
    async with Engine() as engine:
        name = engine.add_cartridge(
            [sys.executable, "-c", "raise SystemExit(3)"], manifest=runtime.manifest
        )
        plans = await engine.plan(TEXT, LOUD)
        assert plans[0].description == "split → ForEach → shout"
        status = {s.name: s for s in engine.status()}[name]
    assert status.starts == 0 and status.state == "stopped"  # the failing program never ran
