"""A graph seeded from machine notation, and the context that opens a graph on an engine.

Each machine node becomes an alias of the same name; each step becomes a cap node reading the
aliases of the nodes it is given (a constant becomes a value node), and its main output is
appended to the alias of the node it makes. Inputs given at the start are value nodes appended
to their node's alias. Per-item maps are not part of graphs: such a machine is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ...graph import GraphRefused, Refusal
from ._session import Catalogue, Graph

__all__ = ("open_graph", "seed_from_machine")


def seed_from_machine(graph: Graph, machine: Any, inputs: Mapping[str, Any] | None = None) -> None:
    """Add ``machine``'s steps and nodes to ``graph`` (as the module docstring says).

    :raises GraphRefused: a per-item map, or an input that names no machine input.
    """
    given = dict(inputs or {})
    for strand in machine.strands:
        label = {n.name: n.label or n.name for n in strand.nodes}
        for node in strand.nodes:
            graph.alias(label[node.name])
        for node in strand.nodes:
            if node.name in strand.inputs and label[node.name] in given:
                value = given.pop(label[node.name])
                made = graph.add_value_node(value, media=str(node.media), explain=label[node.name])
                graph.alias(label[node.name], made)
        for step in strand.steps:
            if step.placement.per_item:
                raise GraphRefused(
                    Refusal.BAD_OP, f"step {step.alias} runs per item; graphs have no maps"
                )
            deps: dict[str, str] = {}
            for binding in step.bindings:
                media = str(binding.arg_media)
                if binding.node is not None:
                    deps[media] = label[binding.node]
                elif binding.constant is not None:
                    value = binding.constant
                    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
                    deps[media] = graph.add_value_node(data, media=media, explain=binding.arg)
            made = graph.instantiate_with_deps(
                str(step.cap), deps, explain=step.label or step.alias
            )
            if step.outputs:
                graph.alias(label[step.outputs[0].node], made)
    if given:
        raise GraphRefused(Refusal.UNKNOWN_NAME, f"no machine input named {sorted(given)[0]!r}")


@asynccontextmanager
async def open_graph(
    engine: Any,
    *,
    hub: Any,
    route: Callable[[str], str | None],
    manifest_of: Callable[[str], Any],
    machine: Any = None,
    inputs: Mapping[str, Any] | None = None,
    load: Any = None,
    limits: Any = None,
    catalogue: Catalogue | None = None,
    observers: Sequence[Any] = (),
    cache: Any = None,
    resolve: Any = None,
) -> AsyncIterator[Graph]:
    graph = Graph(
        engine,
        hub=hub,
        route=route,
        manifest_of=manifest_of,
        limits=limits,
        load=load,
        catalogue=catalogue,
        observers=observers,
        cache=cache,
        resolve=resolve,
    )
    if machine is not None:
        from ...machine import Machine

        resolved = machine if isinstance(machine, Machine) else await engine.machine(machine)
        seed_from_machine(graph, resolved, inputs)
    yield graph
