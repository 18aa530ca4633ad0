"""The machine plan (sans-IO) and the executor over an in-memory engine.

The plan is a pure function of a machine: which scope each step runs in, how each binding
finds its value (local, item, outer, collected), which values stream, and the skip rule. The
executor is then driven with a fake engine (no process, no pipe): items that finish out of
order still come out in item order, the window bounds how many run at once, absent items are
left out of what a map collects.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cartridges"))

import wordkit

from cartridge_runtime.engine import (
    CallError,
    Item,
    MachineRunError,
    OutputData,
    OutputEnded,
    OutputItem,
    OutputStarted,
)
from cartridge_runtime.engine._machines._api import run_to_end
from cartridge_runtime.machine import FeedKind, Machine, parse_machine, plan_machine, step_runs

H = {
    "split": wordkit.SPLIT,
    "upper": wordkit.UPPER,
    "join": wordkit.JOIN,
    "route": wordkit.ROUTE,
    "pair": wordkit.PAIR,
    "count": wordkit.COUNT_WORDS,
    "bang": wordkit.BANG,
}


def machine(*wirings: str, **renamed: str) -> Machine:
    names = {**{k: k for k in H}, **renamed}
    headers = [f"{alias} {H[cap]}" for alias, cap in names.items()
               if any(f"-> {alias}" in w for w in wirings)]  # fmt: skip
    return parse_machine("\n".join(headers + list(wirings)), wordkit.CAPS)


# -- the plan ----------------------------------------------------------------------------------


def test_a_chain_streams_its_values_and_a_map_reads_items() -> None:
    m = machine("doc -> split -> ws", "ws -> upper -> up", "(words=up) -> join -> out")
    plan = plan_machine(m)
    root = plan.roots[0]
    assert [s.step.label for s in root.steps] == ["split", "join"]
    split, join = root.steps
    assert split.feeds[0].kind is FeedKind.LOCAL and split.feeds[0].streamed
    assert join.feeds[0].kind is FeedKind.COLLECTED and not join.feeds[0].streamed
    inner = plan.scope(0, root.children[0])
    assert [s.step.label for s in inner.steps] == ["upper"]
    assert inner.steps[0].feeds[0].kind is FeedKind.ITEM
    assert inner.sources == (m.node("ws").name,)
    assert plan.item_readers == {m.node("ws").name: 1}


def test_a_step_given_several_streamed_values_or_a_policy_takes_them_whole() -> None:
    m = machine("(word=a, right=b) -> pair -> p")
    (pair,) = plan_machine(m).roots[0].steps
    assert [f.streamed for f in pair.feeds] == [False, False]
    m = machine("(word=a) -> upper{retry=2} -> u")
    (upper,) = plan_machine(m).roots[0].steps
    assert upper.buffered and not upper.feeds[0].streamed
    m = machine("(word=a) -> upper -> u")
    (upper,) = plan_machine(m).roots[0].steps
    assert not upper.buffered and upper.feeds[0].streamed


def test_a_value_from_outside_a_map_is_given_to_every_item_whole() -> None:
    m = machine("doc -> split -> ws", "(word=ws, right=r) -> pair -> p")
    plan = plan_machine(m)
    inner = plan.scope(0, plan.roots[0].children[0])
    kinds = {f.binding.arg: f.kind for f in inner.steps[0].feeds}
    assert kinds == {"word": FeedKind.ITEM, "right": FeedKind.OUTER}


def test_the_skip_rule_needs_every_node_and_never_a_constant() -> None:
    m = machine("(word=w, min_length=3) -> route -> (kept=k, dropped=d)", "k -> upper -> u")
    plan = plan_machine(m)
    route = next(s for s in plan.roots[0].steps if s.step.label == "route")
    upper = next(s for s in plan.roots[0].steps if s.step.label == "upper")
    w, k = m.node("w").name, m.node("k").name
    assert step_runs(route, {w: True})
    assert not step_runs(route, {w: False})
    assert (
        step_runs(upper, {k: True})
        and not step_runs(upper, {k: False})
        and not step_runs(upper, {})
    )


# -- the executor over a fake engine -------------------------------------------------------------


class _Response:
    def __init__(self, events: list[Any], delay: float) -> None:
        self._events = events
        self._delay = delay

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[Any]:
        await anyio.sleep(self._delay)
        for event in self._events:
            yield event


class FakeEngine:
    """Answers upper, split, join, route and bang like wordkit, after a random delay; counts
    the calls in flight besides split's."""

    def __init__(self, seed: int = 1) -> None:
        self.random = random.Random(seed)
        self.in_flight = self.most = 0
        self.calls: list[tuple[str, list[Any]]] = []

    @contextlib.asynccontextmanager
    async def call(self, cap: str, inputs: Any = None) -> AsyncIterator[_Response]:
        given = []
        for media, value in inputs:
            if hasattr(value, "source"):
                value = [p async for p in value.source]
            given.append((media, value))
        self.calls.append((cap, given))
        counted = cap != wordkit.SPLIT  # the one call that streams the map's sequence
        self.in_flight += counted
        self.most = max(self.most, self.in_flight)
        try:
            yield _Response(self._answer(cap, given), self.random.random() / 500)
        finally:
            self.in_flight -= counted

    @staticmethod
    def _text(value: Any) -> str:
        if isinstance(value, list):
            value = b"".join(
                bytes(p) if isinstance(p, bytes | memoryview) else str(p).encode() for p in value
            )
        return value.decode() if isinstance(value, bytes) else str(value)

    def _answer(self, cap: str, given: list[Any]) -> list[Any]:
        def scalar(value: bytes, output: str | None = None) -> list[Any]:
            media = wordkit.WORD if output is None else output
            return [OutputStarted(output=output, stream_id="s", media_urn=media, is_sequence=False),
                    OutputData(output=output, stream_id="s", value=value),
                    OutputEnded(output=output, stream_id="s", chunk_count=1)]  # fmt: skip

        word = self._text(given[0][1]) if given else ""
        if cap == wordkit.SPLIT:
            items = [OutputItem(output=None, stream_id="s", value=w.encode()) for w in word.split()]
            return [OutputStarted(output=None, stream_id="s", media_urn=wordkit.WORD,
                                  is_sequence=True), *items,
                    OutputEnded(output=None, stream_id="s", chunk_count=len(items))]  # fmt: skip
        if cap == wordkit.UPPER:
            return scalar(word.upper().encode())
        if cap == wordkit.ROUTE:
            return scalar(word.encode(), wordkit.KEPT if len(word) >= 4 else wordkit.DROPPED)
        if cap == wordkit.BANG and word == "boom":
            raise CallError("BANG", "input", "the word is 'boom'", arg_urn=wordkit.WORD)
        if cap == wordkit.COUNT_WORDS:
            return scalar(str(len(given[0][1])).encode())
        if cap == wordkit.JOIN:
            words = [self._text(i.value if isinstance(i, Item) else i) for i in given[0][1]]
            return scalar(" ".join(words).encode())
        return scalar(word.encode())


@pytest.mark.asyncio
async def test_items_finishing_out_of_order_come_out_in_item_order() -> None:
    words = [f"w{i}" for i in range(300)]
    engine = FakeEngine(seed=7)
    m = machine("doc -> split -> ws", "ws -> upper -> up")
    result = await run_to_end(engine, m, {"doc": " ".join(words)}, window=16)
    assert [i.value for i in result["up"].items] == [w.upper().encode() for w in words]
    assert 1 < engine.most <= 16


@pytest.mark.asyncio
async def test_the_window_bounds_the_items_in_flight() -> None:
    engine = FakeEngine(seed=3)
    m = machine("doc -> split -> ws", "ws -> upper -> up")
    await run_to_end(engine, m, {"doc": " ".join(["x"] * 100)}, window=3)
    assert engine.most == 3


@pytest.mark.asyncio
async def test_absent_items_are_left_out_and_nothing_downstream_is_called() -> None:
    engine = FakeEngine()
    m = machine("doc -> split -> ws", "ws -> route -> (kept=long, dropped=short)",
                "long -> upper -> loud", "(words=loud) -> join -> text")  # fmt: skip
    result = await run_to_end(engine, m, {"doc": "a verylong b another"}, window=4)
    assert result["text"].data == b"VERYLONG ANOTHER"
    upper_calls = [given for cap, given in engine.calls if cap == wordkit.UPPER]
    assert sorted(g[0][1] for g in upper_calls) == [b"another", b"verylong"]


@pytest.mark.asyncio
async def test_the_first_failure_names_step_and_item_over_a_fake_engine() -> None:
    engine = FakeEngine()
    m = machine("doc -> split -> ws", "ws -> bang -> out")
    with pytest.raises(MachineRunError) as caught:
        await run_to_end(engine, m, {"doc": "a b boom c"}, window=2)
    assert (caught.value.step, caught.value.item, caught.value.code) == ("bang", 2, "BANG")


@pytest.mark.asyncio
async def test_constants_are_sent_as_text_under_the_args_stream_urn() -> None:
    engine = FakeEngine()
    m = machine("(word=w, min_length=12) -> route -> (kept=k, dropped=d)")
    await run_to_end(engine, m, {"w": b"x"}, window=1)
    ((_, given),) = engine.calls
    assert dict(given) == {wordkit.WORD: [b"x"], wordkit.MIN_LENGTH: b"12"}


# -- generated pipelines against a direct model ------------------------------------------------


_WORDS = st.lists(st.sampled_from(["a", "bb", "ccc", "dddd", "eeeee", "boom"]), max_size=12)
#: A per-word stage: what it does to one word, or None when the word is absent after it.
_STAGES = {
    "upper": lambda w: w.upper(),
    "kept": lambda w: w if len(w) >= 4 else None,
    "dropped": lambda w: w if len(w) < 4 else None,
    "safe": lambda w: None if w == "boom" else w,  # bang{on_error=absent}
}


def _pipeline_text(stages: list[str], fold: str) -> str:
    lines, node = ["doc -> split -> n0"], "n0"
    for index, stage in enumerate(stages):
        nxt = f"n{index + 1}"
        if stage == "upper":
            lines.append(f"{node} -> upper{index} -> {nxt}")
        elif stage in ("kept", "dropped"):
            other = "dropped" if stage == "kept" else "kept"
            lines.append(f"{node} -> route{index} -> ({stage}={nxt}, {other}=x{index})")
        else:
            lines.append(f"{node} -> bang{index}{{on_error=absent}} -> {nxt}")
        node = nxt
    lines.append(f"(words={node}) -> join -> out" if fold == "join" else f"{node} -> count -> out")
    caps = {"upper": "upper", "kept": "route", "dropped": "route", "safe": "bang"}
    headers = [f"{caps[s]}{i} {H[caps[s]]}" for i, s in enumerate(stages)]
    headers += [f"split {H['split']}", f"{fold} {H[fold]}"]
    return "\n".join(headers + lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=_WORDS,
    stages=st.lists(st.sampled_from(sorted(_STAGES)), max_size=4),
    fold=st.sampled_from(["join", "count"]),
    window=st.integers(1, 8),
    seed=st.integers(0, 10_000),
)
def test_generated_pipelines_give_what_the_words_say(
    words: list[str], stages: list[str], fold: str, window: int, seed: int
) -> None:
    expected: list[str] = []
    for word in words:
        value: str | None = word
        for stage in stages:
            value = _STAGES[stage](value) if value is not None else None
        if value is not None:
            expected.append(value)
    m = parse_machine(_pipeline_text(stages, fold), wordkit.CAPS)
    engine = FakeEngine(seed=seed)
    result = anyio.run(lambda: run_to_end(engine, m, {"doc": " ".join(words)}, window=window))
    if fold == "join":
        assert result["out"].data == " ".join(expected).encode()
    else:
        assert result["out"].data == str(len(expected)).encode()
    assert engine.most <= window or not stages


class _SlowConsumerEngine:
    """``upper`` answers with many pieces, made lazily; ``bang`` reads its streamed input
    slowly. Records how far each got, so that backpressure can be seen: the producer may run
    ahead of the consumer only by what the buffers between them hold."""

    def __init__(self, pieces: int) -> None:
        self.pieces = pieces
        self.produced = 0
        self.consumed = 0
        self.lead = 0  # the most the producer was ever ahead

    @contextlib.asynccontextmanager
    async def call(self, cap: str, inputs: Any = None) -> AsyncIterator[Any]:
        yield self._producer() if cap == wordkit.UPPER else self._consumer(inputs)

    async def _producer(self) -> AsyncIterator[Any]:
        yield OutputStarted(output=None, stream_id="s", media_urn=wordkit.WORD, is_sequence=False)
        for _ in range(self.pieces):
            self.produced += 1
            self.lead = max(self.lead, self.produced - self.consumed)
            yield OutputData(output=None, stream_id="s", value=b"x" * 1024)
        yield OutputEnded(output=None, stream_id="s", chunk_count=self.pieces)

    async def _consumer(self, inputs: Any) -> AsyncIterator[Any]:
        (_, value), *_ = inputs
        async for _piece in value.source:
            self.consumed += 1
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        yield OutputStarted(output=None, stream_id="s", media_urn=wordkit.WORD, is_sequence=False)
        yield OutputData(output=None, stream_id="s", value=str(self.consumed).encode())
        yield OutputEnded(output=None, stream_id="s", chunk_count=1)


@pytest.mark.asyncio
async def test_a_slow_last_step_holds_the_first_one_back() -> None:
    engine = _SlowConsumerEngine(pieces=500)
    # upper -> bang: bang reads upper's output as a stream (one streamed input).
    m = machine("(word=w) -> upper -> u", "u -> bang -> out")
    result = await run_to_end(engine, m, {"w": b"go"}, window=1)
    assert result["out"].data == b"500" and engine.produced == 500
    # A flow holds a few pieces per reader (8): the producer is never far ahead.
    assert engine.lead <= 16, engine.lead
