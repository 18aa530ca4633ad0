"""Running machines on the engine, with subprocess cartridges (wordkit, interop).

Each test states one rule of the executor: streaming between steps, per-item maps in item
order, zips and folds, nested maps, the skip rule for optional outputs (counted by the calls
that reach the cartridge), empty required outputs, fail-fast errors attributed to step and
item, retry and on_error, validation before anything starts, progress, cancellation, peer
calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from _engine_helpers import INTEROP, ROOT

from cartridge_runtime.engine import (
    Engine,
    ItemStarted,
    MachineInputError,
    MachineOutputData,
    MachineProgress,
    MachineRunError,
    StepFinished,
    StepStarted,
)

WORDKIT = ROOT / "cartridges" / "wordkit.py"

TEXT = "media:enc=utf-8"
WORD = "media:enc=utf-8;word"
HEADERS = {
    "split": f'cap:in="{TEXT}";op=split;out="{WORD}"',
    "upper": f'cap:in="{WORD}";op=upper;out="{WORD}"',
    "route": f'cap:in="{WORD}";op=route;out="media:enc=utf-8;kept;word"',
    "join": f'cap:in="{WORD}";op=join;out="{TEXT}"',
    "count": f'cap:in="{WORD}";op=count;out="media:integer;numeric"',
    "bang": f'cap:in="{WORD}";op=bang;out="{WORD}"',
    "slow": f'cap:in="{WORD}";op=slow;out="{WORD}"',
    "flaky": f'cap:in="{WORD}";op=flaky;out="{WORD}"',
    "pair": f'cap:in="{WORD}";op=pair;out="{WORD}"',
    "quiet": f'cap:in="{WORD}";op=quiet;out="{WORD}"',
}


def machine_text(*wirings: str, **aliases: str) -> str:
    """Headers for the caps the wirings use (``alias=cap-name`` renames), then the wirings."""
    names = {**{k: k for k in HEADERS}, **aliases}
    used = [a for a in names if any(f"-> {a}" in w for w in wirings)]
    return "\n".join([f"{a} {HEADERS[names[a]]}" for a in used] + list(wirings))


def wordkit_engine(tmp_path: Path, **env: str) -> tuple[Engine, Path]:
    log = tmp_path / "calls.log"
    log.touch()
    engine = Engine()
    engine.add_cartridge(WORDKIT, env={**os.environ, "WORDKIT_CALL_LOG": str(log), **env})
    return engine, log


def calls(log: Path, op: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()
            if line.split(" ", 1)[0] == op]  # fmt: skip


async def events_of(engine: Engine, text: str, inputs: dict[str, Any]) -> list[Any]:
    machine = await engine.machine(text)
    async with engine.stream_machine(machine, inputs) as run:
        return [event async for event in run]


# -- chains and streaming ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_chain_streams_and_its_downstream_call_starts_before_upstream_ends() -> None:
    import hashlib

    echo = "cap:echo"
    text = f"e1 {echo}\ne2 {echo}\ne3 {echo}\ndoc -> e1 -> a\na -> e2 -> b\nb -> e3 -> out"
    # Far more than every buffer and credit window between the steps can hold: the first step
    # cannot end before the last one started and gave data back.
    block, blocks = os.urandom(1 << 18), 160
    expected = hashlib.sha256(block * blocks).hexdigest()

    async def pieces():  # type: ignore[no-untyped-def]
        for _ in range(blocks):
            yield block

    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        events = await events_of(engine, text, {"doc": pieces()})
        small = os.urandom(3 << 20)
        result = await engine.run_machine(text, {"doc": small})
    assert result.outputs["out"].data == small
    got = hashlib.sha256()
    for e in events:
        if isinstance(e, MachineOutputData):
            got.update(e.value)
    assert got.hexdigest() == expected
    order = [
        (type(e).__name__, e.step) for e in events if isinstance(e, StepStarted | StepFinished)
    ]
    assert order.index(("StepStarted", "e3")) < order.index(("StepFinished", "e1"))
    first_out = next(i for i, e in enumerate(events) if isinstance(e, MachineOutputData))
    last_e1 = next(
        i for i, e in enumerate(events) if isinstance(e, StepFinished) and e.step == "e1"
    )
    assert first_out < last_e1, "output data flows before the first step ends"
    assert result.steps["e2"].bytes_in == len(small) == result.steps["e2"].bytes_out


@pytest.mark.asyncio
async def test_a_text_input_and_a_file_input_reach_the_first_step(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "(words=ws) -> join -> out")
    sample = tmp_path / "doc.txt"
    sample.write_text("from a file")
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        from_text = await engine.run_machine(text, {"doc": "one  two three"})
        from_file = await engine.run_machine(text, {"doc": sample})
        typed = await engine.run_machine(text, {"doc": ("media:enc=utf-8;ext=txt", b"x y")})
    assert from_text["out"].text == "one two three"
    assert from_file["out"].text == "from a file"
    assert typed["out"].text == "x y"


# -- maps, zips, folds ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_per_item_map_keeps_item_order_and_calls_once_per_item(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(40)]
    text = machine_text(
        "doc -> split -> ws",
        "ws -> slow -> s",
        "s -> upper -> up",
        '(words=up, sep=",") -> join -> out',
    )
    engine, log = wordkit_engine(tmp_path, WORDKIT_SLOW_SECONDS="0.01")
    async with engine:
        machine = await engine.machine(text)
        assert machine.step("slow").placement.maps and machine.step("upper").placement.per_item
        assert not machine.step("join").placement.per_item
        result = await engine.run_machine(machine, {"doc": " ".join(reversed(words))}, window=8)
    assert result["out"].text == ",".join(w.upper() for w in reversed(words))
    assert sorted(calls(log, "upper")) == sorted(w.upper().lower() for w in words) or len(
        calls(log, "upper")
    ) == len(words)
    assert result.steps["upper"].calls == len(words) == result.steps["upper"].items


@pytest.mark.asyncio
async def test_a_sequence_output_of_a_map_is_collected_in_item_order(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "ws -> upper -> loud")
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"doc": "c b a"})
    assert [i.value for i in result["loud"].items] == [b"C", b"B", b"A"]


@pytest.mark.asyncio
async def test_two_sequences_are_zipped_item_by_item(tmp_path: Path) -> None:
    text = machine_text(
        "a -> split -> xs", "b -> split2 -> ys", "(word=xs, right=ys) -> pair -> p", split2="split"
    )
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        machine = await engine.machine(text)
        assert (
            machine.step("pair").placement.mapped
            and len(machine.step("pair").placement.mapped) == 2
        )
        result = await engine.run_machine(machine, {"a": "1 2 3", "b": "x y z"})
    assert [i.value for i in result["p"].items] == [b"1-x", b"2-y", b"3-z"]
    assert len(calls(log, "pair")) == 3


@pytest.mark.asyncio
async def test_a_step_joins_the_map_of_what_it_is_given(tmp_path: Path) -> None:
    text = machine_text(
        "doc -> split -> ws", "ws -> upper -> us", "(word=ws, right=us) -> pair -> p"
    )
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"doc": "ab cd"})
    assert [i.value for i in result["p"].items] == [b"ab-AB", b"cd-CD"]


@pytest.mark.asyncio
async def test_nested_maps_run_inside_each_item(tmp_path: Path) -> None:
    # Each word is split again (a sequence per word): upper runs per inner item, and join
    # folds the inner map back into one text per word.
    text = machine_text(
        "doc -> split -> ws",
        "ws -> split2 -> parts",
        "parts -> upper -> up",
        "(words=up) -> join -> t",
        split2="split",
    )
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        machine = await engine.machine(text)
        strand = machine.strands[0]
        assert len(strand.scope_parents) == 3 and strand.scope_parents[2] == 1
        result = await engine.run_machine(machine, {"doc": "ab cd ef"})
    assert [i.value for i in result["t"].items] == [b"AB", b"CD", b"EF"]


# -- optional outputs and the skip rule -------------------------------------------------------


@pytest.mark.asyncio
async def test_downstream_of_an_unfired_optional_output_is_skipped_per_item(tmp_path: Path) -> None:
    text = machine_text(
        "doc -> split -> ws",
        "ws -> route -> (kept=long, dropped=short)",
        "long -> upper -> loud",
        "short -> bang -> quiet_ones",
    )
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"doc": "ant elephant ox giraffe be"})
    # upper reached the cartridge only for the long words, bang only for the short ones.
    assert sorted(calls(log, "upper")) == ["elephant", "giraffe"]
    assert sorted(calls(log, "bang")) == ["ant", "be", "ox"]
    assert [i.value for i in result["loud"].items] == [b"ELEPHANT", b"GIRAFFE"]
    assert [i.value for i in result["quiet_ones"].items] == [b"ant", b"ox", b"be"]
    assert result.steps["upper"].skipped == 3 and result.steps["upper"].calls == 2


@pytest.mark.asyncio
async def test_an_unfired_optional_output_outside_a_map_makes_the_output_absent(
    tmp_path: Path,
) -> None:
    text = machine_text("(word=w) -> route -> (kept=long, dropped=short)", "long -> upper -> loud")
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"w": "ox"})
    assert "loud" in result.absent and "loud" not in result.outputs
    assert result["short"].data == b"ox"
    assert calls(log, "upper") == []
    assert result.steps["upper"].skipped == 1


@pytest.mark.asyncio
async def test_a_required_output_never_written_is_an_empty_value(tmp_path: Path) -> None:
    text = machine_text("(word=w) -> quiet -> nothing", "nothing -> upper -> out")
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"w": "hello"})
    assert result["out"].data == b""
    assert calls(log, "upper") == [""]


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_failing_item_fails_the_run_naming_step_item_and_cause(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "ws -> bang -> out")
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        with pytest.raises(MachineRunError) as caught:
            await engine.run_machine(text, {"doc": "fine boom later"})
        after = await engine.run_machine(text, {"doc": "still works"})
    error = caught.value
    assert (error.step, error.item, error.code, error.attribution_class) == (
        "bang",
        1,
        "BANG",
        "input",
    )
    assert error.arg_urn == WORD and HEADERS["bang"] in error.cap
    assert "step 'bang', item 1" in str(error)
    assert [i.value for i in after["out"].items] == [b"still", b"works"]


@pytest.mark.asyncio
async def test_on_error_absent_makes_the_failed_item_absent_downstream(tmp_path: Path) -> None:
    text = machine_text(
        "doc -> split -> ws", "ws -> bang{on_error=absent} -> ok", "ok -> upper -> up"
    )
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"doc": "one boom two"})
    assert [i.value for i in result["up"].items] == [b"ONE", b"TWO"]
    assert sorted(calls(log, "upper")) == ["one", "two"]
    assert result.steps["bang"].absent == 1 and result.steps["upper"].skipped == 1


@pytest.mark.asyncio
async def test_retry_calls_again_after_the_cartridge_died(tmp_path: Path) -> None:
    mark = tmp_path / "died"
    engine, _ = wordkit_engine(tmp_path, WORDKIT_FLAKY_MARK=str(mark))
    async with engine:
        result = await engine.run_machine(
            machine_text("(word=w) -> flaky{retry=2} -> out"), {"w": "hi"}
        )
        assert mark.exists() and result["out"].data == b"hi"
        assert result.steps["flaky"].calls == 2
        mark.unlink()
        with pytest.raises(MachineRunError) as caught:
            await engine.run_machine(machine_text("(word=w) -> flaky -> out"), {"w": "hi"})
    assert caught.value.code == "CARTRIDGE_DIED" and caught.value.attribution_class == "environment"


# -- validation --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_inputs_are_checked_before_anything_starts(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "(words=ws, sep=s) -> join -> out")
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        machine = await engine.machine(text)
        cases = [
            ({"doc": "a"}, "s", "not given"),
            ({"doc": "a", "s": ",", "extra": "x"}, "extra", "no such input"),
            ({"doc": ("media:image;png", b"x"), "s": ","}, "doc", "does not conform"),
            ({"doc": ["a", "b"], "s": ","}, "doc", "takes one value"),
            ({"doc": tmp_path / "missing.txt", "s": ","}, "doc", "no file"),
            ({"doc": 12, "s": ","}, "doc", "not an input value"),
        ]
        for inputs, node, words in cases:
            with pytest.raises(MachineInputError) as caught:
                engine.stream_machine(machine, inputs)
            assert caught.value.node == node and words in str(caught.value)
            assert caught.value.code == "INVALID_INPUT"
    assert log.read_text() == ""


# -- progress and events -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_progress_names_step_and_item_and_reaches_one(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "ws -> upper -> up", "(words=up) -> join -> out")
    engine, _ = wordkit_engine(tmp_path)
    async with engine:
        events = await events_of(engine, text, {"doc": "a b c d"})
    progress = [e for e in events if isinstance(e, MachineProgress)]
    assert progress[-1].overall == pytest.approx(1.0)
    assert {(e.step, e.item) for e in progress if e.step == "upper"} == {
        ("upper", i) for i in range(4)
    }
    assert all(0.0 <= e.overall <= 1.0 for e in progress)
    assert [e.item for e in events if isinstance(e, ItemStarted)] == [0, 1, 2, 3]


# -- cancellation --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancelling_the_caller_cancels_every_call_in_flight(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "ws -> slow -> s")
    engine, log = wordkit_engine(tmp_path, WORDKIT_SLOW_SECONDS="3")
    async with engine:
        machine = await engine.machine(text)
        with anyio.move_on_after(30):
            async with engine.stream_machine(machine, {"doc": "a b c d e f"}, window=4) as run:
                started = 0
                async for event in run:
                    if isinstance(event, StepStarted) and event.step == "slow":
                        started += 1
                        if started == 4:
                            break
                # The four calls reached the cartridge, whose handlers are now sleeping.
                with anyio.fail_after(10):
                    while len(calls(log, "slow")) < 4:  # noqa: ASYNC110
                        await anyio.sleep(0.02)
        with anyio.fail_after(10):
            while any(s.in_flight for s in engine.status()):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await anyio.sleep(3.5)  # longer than a slow call: a handler still running would end now
        status = engine.status()[0]
        again = await engine.run_machine(machine_text("(word=w) -> upper -> out"), {"w": "x"})
    assert len(calls(log, "slow")) == 4
    assert calls(log, "slow-end") == []
    assert status.state == "running" and again["out"].data == b"X"


# -- peer calls ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_step_whose_handler_calls_a_peer_works() -> None:
    text = "pe cap:peer-echo\ne cap:echo\ndoc -> pe -> a\na -> e -> out"
    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        result = await engine.run_machine(text, {"doc": b"through the host"})
    assert result["out"].data == b"through the host"


# -- scale -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_gigabyte_through_a_three_step_chain_keeps_every_process_small(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    report = tmp_path / "memory.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_machine.py"), "--only", "memory",
         "--gib", "1", "--json", str(report)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    peaks = json.loads(report.read_text())["memory"]["peak_rss_mib"]
    assert len(peaks) == 2, peaks  # the engine and the one interop cartridge
    assert all(0 < mib < 100 for mib in peaks.values()), peaks


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_map_of_ten_thousand_items(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(10_000)]
    text = machine_text("doc -> split -> ws", "ws -> upper -> up", "up -> count -> n")
    engine, log = wordkit_engine(tmp_path)
    async with engine:
        result = await engine.run_machine(text, {"doc": " ".join(words)})
    assert result["n"].data == b"10000"
    assert len(calls(log, "upper")) == 10_000
    assert result.steps["upper"].calls == 10_000 == result.steps["upper"].items


@pytest.mark.asyncio
async def test_an_error_inside_the_engine_block_comes_out_as_itself() -> None:
    with pytest.raises(KeyError, match="mine"):
        async with Engine() as engine:
            engine.add_cartridge(WORDKIT)
            raise KeyError("mine")


def test_a_machine_runs_under_trio_too(tmp_path: Path) -> None:
    text = machine_text("doc -> split -> ws", "ws -> upper -> up", "(words=up) -> join -> out")

    async def main() -> bytes:
        engine, _ = wordkit_engine(tmp_path)
        async with engine:
            result = await engine.run_machine(text, {"doc": "under trio"})
            async with engine.stream_machine(await engine.machine(text), {"doc": "x y"}) as run:
                events = [event async for event in run]
        assert any(isinstance(e, MachineOutputData) for e in events)
        return result["out"].data

    assert anyio.run(main, backend="trio") == b"UNDER TRIO"
