"""Graphs on the engine: the worked trace (two tool rounds, then an answer), resume after a
failure, refusals from inside a cartridge and from the API, cancel and step controls; on
asyncio and on trio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_cartridges import load

from cartridge_runtime.engine import Catalogue, Engine, Graph, InProcess
from cartridge_runtime.graph import GraphRefused, NodeState, Refusal
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, GraphGrowthError, Request

INTEROP = Path(__file__).resolve().parents[2] / "cartridges" / "interop.py"
model = load("model")
weather = load("weather")
convert = load("convert")

GROW_IN = "media:grow-request;json"
GROWER = 'cap:in="media:grow-request;json";op=grower;out="media:enc=utf-8"'
SLEEP = 'cap:in="media:enc=utf-8";op=nap;out="media:enc=utf-8"'
NOBODY = 'cap:in="media:enc=utf-8";op=nobody;out="media:enc=utf-8"'
SYNC = 'cap:in="media:enc=utf-8";op=sync-grower;out="media:enc=utf-8"'


def load_interop() -> Any:
    import importlib.util
    import sys

    if "graph_interop" not in sys.modules:
        spec = importlib.util.spec_from_file_location("graph_interop", INTEROP)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["graph_interop"] = module
        spec.loader.exec_module(module)
    return sys.modules["graph_interop"]


def grower_runtime() -> CartridgeRuntime:
    """A cartridge whose handler sends its input as a growth batch and answers with the
    results, or with the refusal's code and message."""
    runtime = CartridgeRuntime(
        Manifest.build(
            name="grower",
            version="1.0.0",
            description="grows graphs",
            caps=[
                CapDef.simple(GROWER, "Grower", aliases="grower"),
                CapDef.simple(SLEEP, "Nap", aliases="nap"),
                CapDef.simple(SYNC, "Sync grower", aliases="sync-grower"),
            ],
        )
    )

    @runtime.op(GROWER)
    async def grower(req: Request) -> None:
        doc = json.loads(await req.take_input().require_stream_str(GROW_IN))
        try:
            results = await req.graph.grow(doc["ops"])
        except GraphGrowthError as exc:
            await req.output().emit_text(f"{exc.code}|{exc.attribution_class}|{exc.message}")
            return
        await req.output().emit_text(json.dumps(results))

    @runtime.op(SYNC)
    def sync_grower(req: Any) -> None:  # a plain def: req.graph blocks in its thread
        text = req.take_input().require_stream_str(model.TEXT)
        batch = req.graph.batch()
        batch.alias("made", batch.add_value_node(text, media=model.TEXT))
        names = batch.send()
        req.output().emit_text(json.dumps(names))

    @runtime.op(SLEEP)
    async def nap(req: Request) -> None:
        await req.take_input().require_stream_str(model.TEXT)
        await anyio.sleep(30)

    return runtime


def agent_engine(engine: Engine) -> None:
    engine.add_cartridge("model", placement=InProcess(model.runtime))
    engine.add_cartridge("weather", placement=InProcess(weather.runtime))
    engine.add_cartridge("convert", placement=InProcess(convert.runtime))


def seed(g: Graph) -> str:
    prompt = json.dumps({"role": "user", "content": "weather in Oslo, in °F?"}) + "\n"
    g.alias("chat", g.add_value_node(prompt, media=model.CHAT, explain="question"))
    g.alias("answers", g.instantiate_with_deps(model.MODEL, {model.CHAT: "chat"}))
    return g.instantiate_with_deps(model.ANSWER, {model.TEXT: "answers"})


async def worked_trace() -> None:
    async with Engine() as engine:
        agent_engine(engine)
        async with engine.graph() as g:
            target = seed(g)
            result = await g.run(target)
            assert result.ok, result.error
            assert result[target].text == "It is 4 °C and rain in Oslo, that is 39.2 °F."
            m = g.model
            models = m.aliases["answers"]
            assert len(models) == 3  # the first model, then one per tool round
            frozen = [a for a in m.aliases if m.is_frozen(a)]
            assert len(frozen) == 2 and all(a.startswith("chat@") for a in frozen)
            # every earlier iteration reads a frozen copy; the newest reads .chat by name
            sources = [m.nodes[n].deps[0].sources[0].name for n in models]
            assert sources == [*frozen, "chat"]
            assert m.aliases[frozen[0]] == m.aliases["chat"][:1]
            assert m.aliases[frozen[1]] == m.aliases["chat"][:3]
            assert len(m.aliases["chat"]) == 5  # question, (call, result) twice
            # each growth is logged with the node whose call made it
            made = {e["node"] for e in g.log if e["event"] == "op" and e["node"]}
            assert made == set(models[:2])
            assert {r.state for r in result.nodes.values()} == {NodeState.DONE}
            tree = g.tree(target)
            assert tree.count("── weather-") == 1 and "✓ done" in tree and "⋯" not in tree


@pytest.mark.asyncio
async def test_the_worked_trace_two_tool_rounds_then_an_answer() -> None:
    await worked_trace()


def test_the_worked_trace_on_trio() -> None:
    anyio.run(worked_trace, backend="trio")


@pytest.mark.asyncio
async def test_a_run_resumes_after_a_tool_fails_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_WEATHER_FAIL_ONCE", str(tmp_path / "failed"))
    async with Engine() as engine:
        agent_engine(engine)
        async with engine.graph() as g:
            target = seed(g)
            first = await g.run(target)
            assert first.error is not None and first.error.code == "UPSTREAM_DOWN"
            tool = first.failed_node
            assert tool is not None and tool.startswith("weather-")
            message = next(n for n in g.model.nodes if n.startswith("tool-message-"))
            assert first[message].state is NodeState.SKIPPED
            assert first[message].reason == f"input {tool} failed"
            assert first[target].state is NodeState.SKIPPED
            doc = json.loads(g.dumps())
            record = g.write_record(tmp_path / "record")
            assert json.loads((record / "graph.json").read_text()) == doc
            logged = [json.loads(x) for x in (record / "events.jsonl").read_text().splitlines()]
            assert {"event": "node_failed", "node": tool, "code": "UPSTREAM_DOWN"}.items() <= next(
                e for e in logged if e["event"] == "node_failed"
            ).items()
            page = (record / "report.html").read_text()
            assert page.count("<rect") == len(g.model.nodes) and "#f8c9c4" in page  # failed
        seen: list[dict[str, Any]] = []
        async with engine.graph(load=doc, observers=[seen.append]) as g2:
            second = await g2.run(target)
            assert second.ok, second.error
            assert second[target].text.startswith("It is 4 °C and rain")
            started = [e["node"] for e in seen if e["event"] == "node_started"]
            first_model = g2.model.aliases["answers"][0]
            assert first_model not in started  # finished before: not run again
            assert tool in started


@pytest.mark.asyncio
async def test_refusals_from_inside_a_cartridge_name_the_op() -> None:
    async with Engine() as engine:
        engine.add_cartridge("grower", placement=InProcess(grower_runtime()))

        async def grow(ops: list[dict[str, Any]]) -> str:
            async with engine.graph() as g:
                batch = g.add_value_node(json.dumps({"ops": ops}), media=GROW_IN)
                node = g.instantiate_with_deps(GROWER, {GROW_IN: batch})
                result = await g.run(node)
                assert result.ok, result.error
                return result[node].text

        ok = await grow(
            [
                {"op": "add_value_node", "value": "x", "media": model.TEXT},
                {"op": "alias", "alias": ".xs", "node": "$0"},
                {"op": "detach_from_alias", "alias": ".xs"},
            ]
        )
        assert json.loads(ok)[1:] == [".xs", ".xs@4"]
        unknown = await grow(
            [
                {"op": "add_value_node", "value": "x", "media": model.TEXT},
                {"op": "instantiate_with_deps", "cap": SLEEP, "deps": {model.TEXT: "ghost"}},
            ]
        )
        assert unknown.startswith("GRAPH_REFUSED|input|op 1: ") and "'ghost'" in unknown
        nobody = await grow([{"op": "instantiate_with_deps", "cap": NOBODY}])
        assert nobody.startswith("GRAPH_REFUSED|input|op 0: nobody serves")
        cycle = await grow(
            [
                {"op": "alias", "alias": ".loop", "node": None},
                {"op": "instantiate_with_deps", "cap": SLEEP, "deps": {model.TEXT: ".loop"}},
                {"op": "alias", "alias": ".loop", "node": "$1"},
            ]
        )
        assert cycle.startswith("GRAPH_REFUSED|input|op 2: ") and "cycle" in cycle
        # outside a graph: a plain call of the same cap
        batch = json.dumps({"ops": [{"op": "alias", "alias": ".a"}]}).encode()
        outside = (await engine.call(GROWER, [(GROW_IN, batch)])).data.decode()
        assert outside.startswith("GRAPH_REFUSED|input|") and "not a graph call" in outside


@pytest.mark.asyncio
async def test_a_cap_nobody_serves_fails_its_node_and_skips_its_readers() -> None:
    async with Engine() as engine:
        engine.add_cartridge("grower", placement=InProcess(grower_runtime()))
        async with engine.graph() as g:
            v = g.add_value_node("x", media=model.TEXT)
            a = g.instantiate_with_deps(NOBODY, {model.TEXT: v})
            b = g.instantiate_with_deps(SLEEP, {model.TEXT: a})
            result = await g.run()
            assert result.failed_node == a and result.error is not None
            assert result.error.code == "NO_HANDLER"
            assert result[b].state is NodeState.SKIPPED and result[b].reason == f"input {a} failed"


@pytest.mark.asyncio
async def test_cancelling_a_run_ends_every_node() -> None:
    async with Engine() as engine:
        engine.add_cartridge("grower", placement=InProcess(grower_runtime()))
        async with engine.graph() as g:
            v = g.add_value_node("x", media=model.TEXT)
            naps = [g.instantiate_with_deps(SLEEP, {model.TEXT: v}) for _ in range(2)]
            with anyio.move_on_after(1.0):
                await g.run()
            assert [g.state(n) for n in naps] == [NodeState.FAILED, NodeState.FAILED]
        await anyio.sleep(0.2)
        assert all(s.active_calls == 0 for s in engine.status() if hasattr(s, "active_calls"))


@pytest.mark.asyncio
async def test_stop_before_and_one_step() -> None:
    async with Engine() as engine:
        agent_engine(engine)
        async with engine.graph() as g:
            target = seed(g)
            first_model = g.model.aliases["answers"][0]
            result = await g.run(target, stop_before=[first_model])
            assert result.stopped == f"stopped before {first_model}"
            assert result[first_model].state is NodeState.SKIPPED
            step = await g.run(target, one_step=True)
            assert step[first_model].state is NodeState.DONE
            assert step.stopped is not None and step.stopped.startswith("one step")
            rest = await g.run(target)
            assert rest.ok and rest[target].text.startswith("It is")


@pytest.mark.asyncio
async def test_a_catalogue_lets_a_graph_activate_approved_cartridges_only() -> None:
    asked: list[str] = []
    catalogue = Catalogue(
        {"weather": [weather.WEATHER], "convert": [convert.CONVERT]},
        approve=lambda name: asked.append(name) is None and name == "weather",
    )
    async with Engine() as engine:
        agent_engine(engine)
        async with engine.graph(catalogue=catalogue) as g:
            v = g.add_value_node("{}", media=weather.QUERY)
            with pytest.raises(GraphRefused) as err:
                g.instantiate_with_deps(weather.WEATHER, {weather.QUERY: v})
            assert err.value.reason is Refusal.NO_CAP
            assert g.activate("weather") == (weather.WEATHER,)
            g.instantiate_with_deps(weather.WEATHER, {weather.QUERY: v})  # from now on
            with pytest.raises(GraphRefused):
                g.activate("convert")  # not approved
            with pytest.raises(GraphRefused):
                g.activate("mail")  # not offered
            assert asked == ["weather", "convert"]
            # the engine's other cartridges stay callable
            g.instantiate_with_deps(model.ANSWER, {model.TEXT: v})


@pytest.mark.asyncio
async def test_a_graph_seeded_from_machine_notation_runs() -> None:
    async with Engine() as engine:
        agent_engine(engine)
        text = f"""
            answer {model.ANSWER}
            said -> answer -> out
        """
        async with engine.graph(machine=text, inputs={"said": "  hello  "}) as g:
            result = await g.run()
            assert result.ok, result.error
            (node,) = g.model.aliases["out"]
            assert result[node].text == "hello"


@pytest.mark.asyncio
async def test_a_plain_def_handler_grows_its_graph_through_blocking_calls() -> None:
    async with Engine() as engine:
        engine.add_cartridge("grower", placement=InProcess(grower_runtime()))
        async with engine.graph() as g:
            node = g.instantiate_with_deps(
                SYNC, {model.TEXT: g.add_value_node("hi", media=model.TEXT)}
            )
            result = await g.run(node)
            assert result.ok, result.error
            assert json.loads(result[node].text) == ["value-3", "made"]
            assert g.model.nodes["value-3"].value == b"hi"
            assert g.model.aliases["made"] == ("value-3",)


@pytest.mark.asyncio
async def test_a_named_output_feeds_another_node_and_sequences_keep_their_items() -> None:
    interop = load_interop()
    split, echo, words = interop.URNS["split"], interop.URNS["echo"], interop.URNS["words"]
    async with Engine() as engine:
        engine.add_cartridge(str(INTEROP))
        async with engine.graph() as g:
            v = g.add_value_node("hello graphs", media=interop.TEXT)
            s = g.instantiate_with_deps(split, {interop.TEXT: v})
            stats = g.instantiate_with_deps(echo, {interop.BYTES: f"{s}.stats"})
            w = g.instantiate_with_deps(words, {interop.TEXT: v})
            result = await g.run()
            assert result.ok, result.error
            assert result[s].text == "HELLO GRAPHS"
            assert json.loads(result[stats].data) == {"length": 12}
            (seq,) = result[w].outputs.values()
            direct = await engine.call(words, [(interop.TEXT, b"hello graphs")])
            assert seq.is_sequence and seq.items == direct.outputs[None].items


@pytest.mark.asyncio
async def test_a_host_without_graphs_answers_no_handler_and_the_runtime_says_so() -> None:
    from cartridge_runtime.testing import CartridgeHarness

    batch = json.dumps({"ops": [{"op": "alias", "alias": "a"}]}).encode()
    async with CartridgeHarness(grower_runtime()) as h:  # a host with no grow-graph cap
        result = await h.call(GROWER, [(GROW_IN, batch)])
    code, _, message = result.main_bytes.decode().split("|", 2)
    assert code == "NO_HANDLER"
    assert message.startswith("the host cannot grow graphs (NO_HANDLER): ")


@pytest.mark.asyncio
async def test_cap_nodes_are_cached_as_steps(tmp_path: Path) -> None:
    interop = load_interop()
    split, echo = interop.URNS["split"], interop.URNS["echo"]

    async def once() -> dict[str, str]:
        seen: list[dict[str, Any]] = []
        async with Engine() as engine:
            engine.add_cartridge(str(INTEROP))
            async with engine.graph(cache=tmp_path / "steps", observers=[seen.append]) as g:
                v = g.add_value_node("cache me", media=interop.TEXT)
                s = g.instantiate_with_deps(split, {interop.TEXT: v})
                e = g.instantiate_with_deps(echo, {interop.BYTES: f"{s}.stats"})
                g.alias("live")
                reader = g.instantiate_with_deps(echo, {interop.BYTES: ["live", s]})
                result = await g.run()
                assert result.ok, result.error
                assert result[s].text == "CACHE ME"
                assert json.loads(result[e].data) == {"length": 8}
                assert result[reader].text == "CACHE ME"
        return {ev["node"]: ev["cache"] for ev in seen if ev["event"] == "node_done"}

    # cap-4 reads a live alias: never cached
    assert await once() == {"cap-2": "miss", "cap-3": "miss", "cap-4": ""}
    assert await once() == {"cap-2": "hit", "cap-3": "hit", "cap-4": ""}


@pytest.mark.asyncio
async def test_a_call_that_grew_the_graph_is_never_replayed_from_the_cache(tmp_path: Path) -> None:
    async def once() -> tuple[str, tuple[str, ...]]:
        seen: list[dict[str, Any]] = []
        async with Engine() as engine:
            engine.add_cartridge("grower", placement=InProcess(grower_runtime()))
            async with engine.graph(cache=tmp_path / "steps", observers=[seen.append]) as g:
                ops = {"ops": [{"op": "alias", "alias": "grown"}]}
                batch = g.add_value_node(json.dumps(ops), media=GROW_IN)
                node = g.instantiate_with_deps(GROWER, {GROW_IN: batch})
                result = await g.run(node)
                assert result.ok, result.error
                (cache,) = [e["cache"] for e in seen if e["event"] == "node_done"]
                return cache, tuple(g.model.aliases)

    assert await once() == ("miss", ("grown",))
    assert await once() == ("miss", ("grown",))  # called again: its growth happens again


@pytest.mark.asyncio
async def test_a_cartridge_activates_a_catalogue_cartridge_over_the_wire() -> None:
    asked: list[str] = []
    catalogue = Catalogue(
        {"weather": [weather.WEATHER], "convert": [convert.CONVERT]},
        approve=lambda name: asked.append(name) is None and name == "weather",
    )
    async with Engine() as engine:
        agent_engine(engine)
        engine.add_cartridge("grower", placement=InProcess(grower_runtime()))
        async with engine.graph(catalogue=catalogue) as g:

            async def grow(ops: list[dict[str, Any]]) -> str:
                batch = g.add_value_node(json.dumps({"ops": ops}), media=GROW_IN)
                node = g.instantiate_with_deps(GROWER, {GROW_IN: batch})
                result = await g.run(node)
                assert result.ok, result.error
                return result[node].text

            query = {"op": "add_value_node", "value": "{}", "media": weather.QUERY}
            tool = {"op": "instantiate_with_deps", "cap": weather.WEATHER}
            # Not active yet: the tool is refused to the model as to the application.
            refused = await grow([query, {**tool, "deps": {weather.QUERY: "$0"}}])
            assert refused.startswith("GRAPH_REFUSED|input|op 1: ")
            # A refused batch takes its activation back with it: whole or nothing.
            refused = await grow(
                [{"op": "activate", "cartridge": "weather"}, {"op": "alias", "alias": "$9"}]
            )
            assert refused.startswith("GRAPH_REFUSED|input|op 1: ") and g.activated == {}
            # Activated by the model, approved by the application: usable from the next op on.
            made = json.loads(
                await grow(
                    [
                        {"op": "activate", "cartridge": "weather"},
                        query,
                        {**tool, "deps": {weather.QUERY: "$1"}},
                    ]
                )
            )
            assert made[0] == "weather" and g.model.nodes[made[2]].cap == weather.WEATHER
            # Not approved, or not offered: refused, naming the op.
            for name in ("convert", "mail"):
                no = await grow([{"op": "activate", "cartridge": name}])
                assert no.startswith("GRAPH_REFUSED|input|op 0: ") and repr(name) in no
            assert asked == ["weather", "weather", "convert"]


COUNT = 'cap:in="media:enc=utf-8;list";op=count-items;out="media:enc=utf-8"'


def counter_runtime() -> CartridgeRuntime:
    """A cartridge whose one cap reads its input item by item and answers how it arrived:
    ``sequence`` or ``bytes``, then each item's value and meta."""
    runtime = CartridgeRuntime(
        Manifest.build(
            name="counter",
            version="1.0.0",
            description="counts items",
            caps=[
                CapDef.simple(COUNT, "Count items", aliases="count-items", input_is_sequence=True)
            ],
        )
    )

    @runtime.op(COUNT)
    async def count(req: Request) -> None:
        seen: list[Any] = []
        kind = "none"
        async for stream in req.take_input():
            kind = "sequence" if stream.is_sequence else "bytes"
            async for item in stream.items():
                value = item.value
                seen.append([value.decode() if isinstance(value, bytes) else value, item.meta])
        await req.output().emit_text(json.dumps({"kind": kind, "items": seen}))

    return runtime


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_sequence_output_reaches_the_node_reading_it_as_items(backend: str) -> None:
    interop = load_interop()
    words = interop.URNS["words"]

    async def main() -> None:
        async with Engine() as engine:
            engine.add_cartridge(str(INTEROP))
            engine.add_cartridge("counter", placement=InProcess(counter_runtime()))
            async with engine.graph() as g:
                v = g.add_value_node("one two three", media=interop.TEXT)
                w = g.instantiate_with_deps(words, {interop.TEXT: v})
                # the words arrive as three items, not as their bytes run together
                c = g.instantiate_with_deps(COUNT, {"media:enc=utf-8;list": w})
                # a value (scalar) into an argument declared a sequence: one item
                one = g.instantiate_with_deps(COUNT, {"media:enc=utf-8;list": v})
                # an alias of both: the words' items, then the value as one more item
                g.alias("both", w)
                g.alias("both", v)  # appends: an alias takes each node given it
                mixed = g.instantiate_with_deps(COUNT, {"media:enc=utf-8;list": "both"})
                # an argument that takes one value gets the items' bytes one after another
                joined = g.instantiate_with_deps(interop.URNS["echo"], {interop.BYTES: w})
                result = await g.run()
                assert result.ok, result.error
                got = json.loads(result[c].text)
                assert got["kind"] == "sequence"
                assert [value for value, _ in got["items"]] == ["one", "two", "three"]
                assert json.loads(result[one].text)["items"] == [["one two three", None]]
                assert [value for value, _ in json.loads(result[mixed].text)["items"]] == [
                    "one",
                    "two",
                    "three",
                    "one two three",
                ]
                assert result[joined].data == b"onetwothree"

    anyio.run(main, backend=backend)
