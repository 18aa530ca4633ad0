"""The grow-graph contract from another language: a model cartridge in JavaScript, speaking
raw frames with its own CBOR codec, runs the agent loop (two tool rounds, then an answer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from agent_cartridges import AGENT, load

from cartridge_runtime.engine import Engine, InProcess
from cartridge_runtime.graph import NodeState
from cartridge_runtime.manifest import CapDef, Manifest

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

model = load("model")
weather = load("weather")
convert = load("convert")

SCRIPT = Path(__file__).resolve().parent / "js" / "model_cartridge.js"
MODEL_JS = 'cap:in="media:chat;jsonl";op=model-js;out="media:enc=utf-8"'


def js_env(tmp: Path, *, parent: bool = True) -> dict[str, str]:
    manifest = Manifest.build(
        name="js-model",
        version="1.0.0",
        description="the agent's model, in JavaScript",
        caps=[CapDef.simple(MODEL_JS, "Model (JS)", aliases="model-js")],
    )
    path = tmp / "manifest.json"
    path.write_bytes(manifest.to_json_bytes())
    env = {
        "GRAPH_JS_MANIFEST": str(path),
        "GRAPH_JS_RULES": str(AGENT / "rules.jsonl"),
        "GRAPH_JS_CAP": MODEL_JS,
    }
    if not parent:
        env["GRAPH_JS_NO_PARENT"] = "1"
    return env


async def js_loop(tmp: Path, parent: bool) -> None:
    async with Engine() as engine:
        engine.add_cartridge(str(SCRIPT), name="js-model", env=js_env(tmp, parent=parent))
        engine.add_cartridge("model", placement=InProcess(model.runtime))
        engine.add_cartridge("weather", placement=InProcess(weather.runtime))
        engine.add_cartridge("convert", placement=InProcess(convert.runtime))
        async with engine.graph() as g:
            prompt = json.dumps({"role": "user", "content": "weather?"}) + "\n"
            g.alias("chat", g.add_value_node(prompt, media=model.CHAT))
            g.alias("answers", g.instantiate_with_deps(MODEL_JS, {model.CHAT: "chat"}))
            target = g.instantiate_with_deps(model.ANSWER, {model.TEXT: "answers"})
            result = await g.run(target)
            assert result.ok, result.error
            assert result[target].text == "It is 4 °C and rain in Oslo, that is 39.2 °F."
            models = g.model.aliases["answers"]
            assert len(models) == 3
            assert all(g.model.nodes[n].cap == MODEL_JS for n in models)
            assert {result[n].state for n in g.model.nodes} == {NodeState.DONE}
            made_by = {g.model.nodes[n].made_by for n in g.model.nodes} - {None}
            assert made_by == set(models[:2])


@pytest.mark.asyncio
async def test_a_javascript_model_grows_its_graph_naming_its_parent(tmp_path: Path) -> None:
    await js_loop(tmp_path, parent=True)


def test_a_javascript_model_grows_its_graph_without_a_parent_on_trio(tmp_path: Path) -> None:
    anyio.run(js_loop, tmp_path, False, backend="trio")
