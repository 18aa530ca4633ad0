"""Run the agent: a question, two tool rounds, an answer; print the conversation and the tree.

    python examples/agent/run.py "What is the weather in Oslo, in Fahrenheit?"

The graph starts with the question in ``chat``, one model node reading ``chat``, and an
``answer`` node reading ``answers`` (every model iteration's text, in turn). Each tool call
grows the graph from inside the model cartridge (see ``model.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from cartridge_runtime.engine import Engine, Graph, GraphResult

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from model import ANSWER, CHAT, MODEL, TEXT  # noqa: E402


def seed(g: Graph, question: str) -> str:
    """The starting graph; the node to run toward."""
    prompt = json.dumps({"role": "user", "content": question}) + "\n"
    g.alias("chat", g.add_value_node(prompt, media=CHAT, explain="question"))
    g.alias("answers", g.instantiate_with_deps(MODEL, {CHAT: "chat"}, explain="model"))
    return g.instantiate_with_deps(ANSWER, {TEXT: "answers"}, explain="answer")


def conversation(g: Graph, result: GraphResult) -> list[dict]:
    lines = []
    for member in g.model.aliases["chat"]:
        node = g.model.nodes[member]
        data = node.value if node.value is not None else result[member].data
        lines.extend(json.loads(x) for x in data.decode().splitlines() if x.strip())
    return lines


async def main(question: str) -> int:
    async with Engine() as engine:
        for name in ("model", "weather", "convert"):
            engine.add_cartridge(str(HERE / f"{name}.py"))
        async with engine.graph() as g:
            target = seed(g, question)
            result = await g.run(target)
            for message in conversation(g, result):
                print(json.dumps(message, ensure_ascii=False))
            print()
            print(g.tree(target))
            print()
            if result.error is not None:
                print(f"failed at {result.failed_node}: {result.error.message}")
                return 1
            print("answer:", result[target].text)
    return 0


if __name__ == "__main__":
    question = sys.argv[1] if len(sys.argv) > 1 else "What is the weather in Oslo, in °F?"
    sys.exit(anyio.run(main, question))
