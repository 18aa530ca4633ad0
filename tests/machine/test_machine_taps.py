"""Taps: a run gives back any named node, not only the machine's outputs: an intermediate node
whole, a node made per item of a map as its items in item order, or every node (``"all"``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from cartridge_runtime.engine import Engine, MachineInputError, MachineOutputData

WORDKIT = Path(__file__).resolve().parents[2] / "cartridges" / "wordkit.py"
TEXT = "media:enc=utf-8"
WORD = "media:enc=utf-8;word"
MACHINE = "\n".join(
    [
        f'split cap:in="{TEXT}";op=split;out="{WORD}"',
        f'upper cap:in="{WORD}";op=upper;out="{WORD}"',
        f'bang cap:in="{WORD}";op=bang;out="{WORD}"',
        f'join cap:in="{TEXT}";op=join;out="{TEXT}"',
        "doc -> split -> ws",
        "ws -> upper -> up",
        "up -> bang -> b",
        "(words=b) -> join -> out",
    ]
)


def _wordkit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wordkit_for_taps", WORDKIT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def engine() -> Engine:
    e = Engine()
    e.add_cartridge(_wordkit().runtime)  # in process: no start-up cost
    return e


@pytest.mark.asyncio
async def test_a_map_inner_node_comes_back_as_its_items_in_order() -> None:
    async with engine() as e:
        machine = await e.machine(MACHINE)
        assert machine.node("up").scope != 0  # made once per item of the map
        result = await e.run_machine(machine, {"doc": "c a b"}, outputs=["up", "ws"])
    assert [i.value for i in result["up"].items] == [b"C", b"A", b"B"]
    assert [i.value for i in result["ws"].items] == [b"c", b"a", b"b"]
    assert result["out"].text == "C A B"  # the machine's own output is still there


@pytest.mark.asyncio
async def test_a_tap_streams_as_output_data_events() -> None:
    async with engine() as e:
        machine = await e.machine(MACHINE)
        async with e.stream_machine(machine, {"doc": "x y"}, outputs=["up"]) as run:
            taps = [
                (ev.output, ev.value, ev.is_item)
                async for ev in run
                if isinstance(ev, MachineOutputData) and ev.output == "up"
            ]
    assert taps == [("up", b"X", True), ("up", b"Y", True)]


@pytest.mark.asyncio
async def test_all_gives_every_named_node() -> None:
    async with engine() as e:
        result = await e.run_machine(MACHINE, {"doc": "p q"}, outputs="all")
    assert sorted(result.outputs) == ["b", "doc", "out", "up", "ws"]
    assert result["doc"].data == b"p q"
    assert [i.value for i in result["b"].items] == [b"P", b"Q"]


@pytest.mark.asyncio
async def test_a_tap_on_a_node_downstream_of_a_skipped_step_is_absent() -> None:
    text = "\n".join(
        [
            f'split cap:in="{TEXT}";op=split;out="{WORD}"',
            f'route cap:in="{WORD}";op=route;out="media:enc=utf-8;kept;word"',
            f'upper cap:in="{WORD}";op=upper;out="{WORD}"',
            f'join cap:in="{TEXT}";op=join;out="{TEXT}"',
            "doc -> split -> ws",
            "ws -> route -> (kept=k, dropped=d)",
            "k -> upper -> up",
            "(words=d) -> join -> short",
        ]
    )
    async with engine() as e:
        result = await e.run_machine(text, {"doc": "ox elephant"}, outputs=["up", "k"])
    assert [i.value for i in result["up"].items] == [b"ELEPHANT"]  # ox was dropped
    assert [i.value for i in result["k"].items] == [b"elephant"]


@pytest.mark.asyncio
async def test_a_tap_naming_no_node_is_refused_before_anything_starts() -> None:
    async with engine() as e:
        machine = await e.machine(MACHINE)
        with pytest.raises(MachineInputError) as refused:
            await e.run_machine(machine, {"doc": "a"}, outputs=["nope"])
        assert refused.value.node == "nope" and "its nodes" in str(refused.value)
        with pytest.raises(MachineInputError):
            e.stream_machine(machine, {"doc": "a"}, outputs="every")
