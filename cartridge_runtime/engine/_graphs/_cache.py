"""The step cache for a graph's cap nodes: a node is keyed as a machine step would be.

A cap node is cached when everything it reads is known when it starts: every source is a node
or a frozen alias (a live alias may still grow) and each source node has finished. Its key is
the machine step's recipe (MCH-19, MCH-21) with the policy ``graph``: the cap, the identity
of the cartridge serving it, and per argument its media URN and the digest of the bytes it
reads. A hit replays the stored outputs (no call is made); a miss records the call's outputs
and stores them once the call ended well.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs

from ...graph import GraphModel, GraphNode, NodeKind, NodeState
from .._machines._cache_key import PieceHasher, step_key
from .._machines._cache_step import Recording, StepCache, replay
from ._flows import NodeFlows

__all__ = ("NodeCall", "cached_key", "lookup_node_call", "recorded", "store_node_call")

POLICY = "graph"


@attrs.define
class NodeCall:
    """One cached node call's bookkeeping: ``cache`` is ``hit``, ``miss`` or ``""``."""

    key: str | None = None
    cache: str = ""
    writer: Any = None
    recordings: list[Recording] = attrs.field(factory=list)


def _digest(flows: NodeFlows, output: str | None) -> Any:
    flow = flows.flows.get(output)
    hasher = PieceHasher(flow.is_sequence if flow is not None else False)
    for piece in flow.pieces if flow is not None else ():
        hasher.add(piece)
    hasher.complete = True
    return hasher.digest()


async def cached_key(
    cache: StepCache,
    model: GraphModel,
    node: GraphNode,
    media: list[str],
    state_of: Any,
    flows_of: Any,
    output_key: Any,
) -> str | None:
    """The node's key, or None when it may not be cached (module docstring)."""
    assert node.cap is not None
    digests = []
    for dep, urn in zip(node.deps, media, strict=True):
        for source in dep.sources:
            if source.name in model.aliases and not model.is_frozen(source.name):
                return None
        for name, output in model.expand(dep):
            if state_of(name) is not NodeState.DONE:
                return None
            flows = flows_of(name)
            if output is not None and output not in flows.flows:
                output = output_key(model.nodes[name], output)
            if (
                model.nodes[name].kind is NodeKind.CAP
                and output is not None
                and output not in flows.flows
            ):
                return None
            digests.append((urn, _digest(flows, output)))
    identity = await cache.identity(node.cap)
    if identity is None:
        return None
    return step_key(node.cap, identity, POLICY, digests)


async def lookup_node_call(
    cache: StepCache, node: GraphNode, call: NodeCall
) -> AbstractAsyncContextManager[Any] | None:
    """A hit's replayed response, or None after making the miss's writer."""
    assert node.cap is not None and call.key is not None
    entry = await cache.lookup(call.key)
    if entry is not None:
        call.cache = "hit"
        return replay(cache.store, entry, lambda _sid: True)
    call.cache = "miss"
    call.writer = cache.store.writer(node.cap, node.name)
    return None


def recorded(response: Any, call: NodeCall) -> Any:
    """``response`` with its outputs written to the miss's writer on the way (or as it is)."""
    if call.writer is None:
        return response
    rec = Recording(response, call.writer)
    call.recordings.append(rec)
    return rec


async def store_node_call(cache: StepCache, call: NodeCall, ok: bool) -> None:
    """A miss that ended well goes into the store under its key (``ok`` false: a failure, or
    a call that grew the graph, whose effect a replay would not have)."""
    if call.writer is None:
        return
    if ok and call.key is not None and all(r.finished for r in call.recordings):
        await cache.commit(call.writer, call.key)
    else:
        call.writer.discard()
