"""A scripted "model" cartridge: deterministic rules over the conversation, no network.

It reads the conversation (JSON Lines, one message per line) and looks at the last message:
a rule of ``rules.jsonl`` (next to this file) matching it either calls a tool or answers. To
call a tool it grows the graph it runs in, in one batch (the tool-calling loop):

1. freeze ``chat`` for itself (``detach_from_alias``);
2. a value node with the assistant's tool call, appended to ``chat``;
3. a value node with the tool's input, the tool's node reading it, and a node turning the
   tool's output into a message (``tool-message``), appended to ``chat``;
4. its own next iteration, reading ``chat`` (all of the above), appended to ``answers``.

Its own output is the answer's text when it answers, and nothing when it calls a tool.
"""

from __future__ import annotations

import json
from pathlib import Path

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, OpError, Request

CHAT = "media:chat;jsonl"
TEXT = "media:enc=utf-8"
SPEC = "media:tool-spec;json"
TOOL_OUT = "media:tool-output;enc=utf-8"
MODEL = 'cap:in="media:chat;jsonl";op=model;out="media:enc=utf-8"'
TOOL_MESSAGE = 'cap:in="media:tool-output;enc=utf-8";op=tool-message;out="media:chat;jsonl"'
ANSWER = 'cap:in="media:enc=utf-8";op=answer;out="media:enc=utf-8"'

RULES_FILE = Path(__file__).with_name("rules.jsonl")

manifest = Manifest.build(
    name="agent-model",
    version="1.0.0",
    description="A scripted model that calls tools by growing its graph",
    caps=[
        CapDef.simple(MODEL, "Model", aliases="model", description="Answer or call a tool"),
        CapDef.simple(
            TOOL_MESSAGE,
            "Tool message",
            aliases="tool-message",
            description="A tool's output as a conversation message",
            extra_args=[ArgDef.flag(SPEC, "--spec", name="spec", required=True)],
        ),
        CapDef.simple(ANSWER, "Answer", aliases="answer", description="The answers, read in turn"),
    ],
)
runtime = CartridgeRuntime(manifest)


def load_rules(path: Path = RULES_FILE) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _key(message: dict) -> str:
    """What a rule matches: ``user``, or ``tool:<name>`` for a tool's result."""
    if message.get("role") == "tool":
        return f"tool:{message.get('name')}"
    return str(message.get("role"))


@runtime.op(MODEL)
async def model(req: Request) -> None:
    text = await req.take_input().require_stream_str(CHAT)
    chat = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not chat:
        raise OpError("EMPTY_CHAT", "the conversation is empty", "input")
    last = chat[-1]
    rule = next((r for r in load_rules() if r["after"] == _key(last)), None)
    if rule is None:
        raise OpError("NO_RULE", f"no rule after {_key(last)!r}", "input")
    if "answer" in rule:
        facts = {m["name"]: m["content"] for m in chat if m.get("role") == "tool"}
        await req.output().emit_text(rule["answer"].format(**facts))
        return
    call = rule["call"]
    call_id = f"call-{sum(1 for m in chat if m.get('role') == 'tool') + 1}"
    asked = {"role": "assistant", "tool_call": {"id": call_id, "name": call["tool"]}}
    spec = {"id": call_id, "name": call["tool"]}
    batch = req.graph.batch()
    batch.detach_from_alias("chat")
    asked_node = batch.add_value_node(json.dumps(asked) + "\n", media=CHAT, explain="tool call")
    batch.alias("chat", asked_node)
    tool_in = batch.add_value_node(
        json.dumps(call["arguments"]), media=call["in"], explain=f"input of {call['tool']}"
    )
    tool = batch.instantiate_with_deps(call["cap"], {call["in"]: tool_in}, explain=call["tool"])
    spec_node = batch.add_value_node(json.dumps(spec), media=SPEC, explain="tool spec")
    message = batch.instantiate_with_deps(
        TOOL_MESSAGE, {TOOL_OUT: tool, SPEC: spec_node}, explain="tool result"
    )
    batch.alias("chat", message)
    following = batch.instantiate_with_deps(MODEL, {CHAT: "chat"}, explain="model")
    batch.alias("answers", following)
    await batch.send()


@runtime.op(TOOL_MESSAGE)
async def tool_message(req: Request) -> None:
    package = req.take_input()
    output = await package.require_stream_str(TOOL_OUT)
    spec = json.loads(await package.require_stream_str(SPEC))
    line = {"role": "tool", "id": spec["id"], "name": spec["name"], "content": output.strip()}
    await req.output().emit_text(json.dumps(line) + "\n")


@runtime.op(ANSWER)
async def answer(req: Request) -> None:
    text = await req.take_input().require_stream_str(TEXT)
    await req.output().emit_text(text.strip())


if __name__ == "__main__":
    runtime.run()
