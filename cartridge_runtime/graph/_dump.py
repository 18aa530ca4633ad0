"""A graph as JSON and back: every node, alias and state, so a run resumes (GRW-15).

The document is one JSON object::

    {"format": "cartridge-graph", "version": 1, "counter": N,
     "nodes": [{"name", "kind", "cap" | "media" + "value" | "value_b64", "deps",
                "explain", "made_by", "state", "reason"?, "outputs"?}, ...],
     "aliases": [{"name", "members": [...], "frozen": bool}, ...]}

A source is its name, or ``{"node": NAME, "output": OUTPUT}`` for a named output.
``outputs`` holds what the engine kept of a finished cap node (opaque here). Loading checks
every name a node or alias refers to; finished nodes load finished, the others wait again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from ._errors import GraphRefused, Refusal
from ._model import Dep, GraphLimits, GraphModel, GraphNode, NodeKind, Source
from ._schedule import NodeState

__all__ = ("dump_graph", "load_graph", "FORMAT")

FORMAT = "cartridge-graph"


def _source(s: Source) -> Any:
    return s.name if s.output is None else {"node": s.name, "output": s.output}


def dump_graph(
    model: GraphModel,
    states: Mapping[str, NodeState] | None = None,
    *,
    reasons: Mapping[str, str] | None = None,
    outputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-able document of ``model`` (with each node's state, and the outputs given)."""
    nodes = []
    for node in model:
        entry: dict[str, Any] = {"name": node.name, "kind": node.kind.value}
        if node.kind is NodeKind.VALUE:
            assert node.value is not None
            entry["media"] = node.media
            try:
                entry["value"] = node.value.decode("utf-8")
            except UnicodeDecodeError:
                entry["value_b64"] = base64.b64encode(node.value).decode("ascii")
        else:
            entry["cap"] = node.cap
            entry["deps"] = [
                {"arg": d.arg, "sources": [_source(s) for s in d.sources]} for d in node.deps
            ]
        entry["explain"] = node.explain
        entry["made_by"] = node.made_by
        state = (states or {}).get(node.name)
        if state is None:
            state = NodeState.DONE if node.kind is NodeKind.VALUE else NodeState.WAITING
        entry["state"] = state.value
        if reasons and node.name in reasons:
            entry["reason"] = reasons[node.name]
        if outputs and node.name in outputs:
            entry["outputs"] = outputs[node.name]
        nodes.append(entry)
    aliases = [
        {"name": name, "members": list(members), "frozen": model.is_frozen(name)}
        for name, members in model.aliases.items()
    ]
    return {
        "format": FORMAT,
        "version": 1,
        "counter": model.counter,
        "nodes": nodes,
        "aliases": aliases,
    }


def _bad(detail: str) -> GraphRefused:
    return GraphRefused(Refusal.BAD_OP, f"not a graph document: {detail}")


def _load_source(raw: Any) -> Source:
    if isinstance(raw, str) and raw:
        return Source(raw)
    if isinstance(raw, dict) and isinstance(raw.get("node"), str):
        output = raw.get("output")
        if output is not None and not isinstance(output, str):
            raise _bad(f"bad output in {raw!r}")
        return Source(raw["node"], output)
    raise _bad(f"bad source {raw!r}")


def load_graph(
    doc: Mapping[str, Any] | str | bytes, limits: GraphLimits | None = None
) -> tuple[GraphModel, dict[str, NodeState], dict[str, Any]]:
    """The model, the states and the kept outputs a document holds.

    :raises GraphRefused: the document is not one :func:`dump_graph` writes, or it names
        something it does not hold.
    """
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise _bad(f"not JSON ({exc})") from None
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT or doc.get("version") != 1:
        raise _bad("no 'format': 'cartridge-graph', 'version': 1")
    try:
        nodes: list[GraphNode] = []
        states: dict[str, NodeState] = {}
        outputs: dict[str, Any] = {}
        for raw in doc["nodes"]:
            kind = NodeKind(raw["kind"])
            name = raw["name"]
            if kind is NodeKind.VALUE:
                if "value_b64" in raw:
                    value = base64.b64decode(raw["value_b64"], validate=True)
                else:
                    value = str(raw["value"]).encode("utf-8")
                node = GraphNode(name, kind, media=raw["media"], value=value)
            else:
                deps = tuple(
                    Dep(str(d["arg"]), tuple(_load_source(s) for s in d["sources"]))
                    for d in raw.get("deps", [])
                )
                node = GraphNode(name, kind, cap=str(raw["cap"]), deps=deps)
            node = GraphNode(
                node.name,
                node.kind,
                cap=node.cap,
                media=node.media,
                value=node.value,
                deps=node.deps,
                explain=raw.get("explain"),
                made_by=raw.get("made_by"),
            )
            nodes.append(node)
            states[name] = NodeState(raw.get("state", "waiting"))
            if "outputs" in raw:
                outputs[name] = raw["outputs"]
        aliases = {str(a["name"]): [str(m) for m in a["members"]] for a in doc["aliases"]}
        frozen = [str(a["name"]) for a in doc["aliases"] if a.get("frozen")]
        counter = int(doc["counter"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(f"{type(exc).__name__}: {exc}") from None
    names = {n.name for n in nodes}
    for node in nodes:
        for dep in node.deps:
            for s in dep.sources:
                if s.name not in names and s.name not in aliases:
                    raise _bad(f"node {node.name!r} reads {s.name!r}, which it does not hold")
    for alias, members in aliases.items():
        for m in members:
            if m not in names:
                raise _bad(f"alias {alias!r} holds {m!r}, which is not a node")
    model = GraphModel(limits)
    if len(nodes) > model.limits.max_nodes:
        raise GraphRefused(Refusal.LIMIT, f"the graph is full ({model.limits.max_nodes} nodes)")
    model.load(nodes, aliases, frozen, counter)
    return model, states, outputs
