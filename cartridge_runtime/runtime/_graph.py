"""``req.graph``: a handler grows the graph its call runs in (GRW-10 .. GRW-14).

Each operation is a peer call to the grow-graph cap, which the engine answers itself; a batch
(:meth:`GraphGrowth.batch`) sends several operations in one call, applied whole or not at all,
and may refer to the result of an earlier op of the same batch as ``"$K"``. The batch names
the request it grows from (``"parent"``), so a cartridge serving several graph calls at once
grows the right one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from cartridge_runtime.protocol import ErrorCode, MessageId

from ._errors import PeerCallError

__all__ = ("GraphGrowth", "GraphBatch", "GraphGrowthError", "GROW_GRAPH_CAP")

GROW_GRAPH_CAP: Final = 'cap:in="media:graph-ops;json";op=grow-graph;out="media:graph-results;json"'
_OPS_MEDIA: Final = "media:graph-ops;json"


class GraphGrowthError(PeerCallError):
    """Growing the graph failed: the engine refused the batch (``GRAPH_REFUSED``, naming the
    op's index), or the host has no graphs (``NO_HANDLER``); code and class are the ERR's."""


def _value_op(value: bytes | str, media: str, explain: str | None) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "add_value_node", "media": media}
    if isinstance(value, str):
        op["value"] = value
    else:
        try:
            op["value"] = value.decode("utf-8")
        except UnicodeDecodeError:
            op["value_b64"] = base64.b64encode(value).decode("ascii")
    if explain is not None:
        op["explain"] = explain
    return op


class GraphBatch:
    """Operations gathered to send in one call; each method returns ``"$K"``, the reference
    to its result that later ops of the batch may use."""

    def __init__(self, growth: GraphGrowth) -> None:
        self._growth = growth
        self.ops: list[dict[str, Any]] = []

    def _add(self, op: dict[str, Any]) -> str:
        self.ops.append(op)
        return f"${len(self.ops) - 1}"

    def add_value_node(self, value: bytes | str, *, media: str, explain: str | None = None) -> str:
        return self._add(_value_op(value, media, explain))

    def instantiate_with_deps(
        self,
        cap: str,
        deps: Mapping[str, str | Sequence[str]] | None = None,
        *,
        explain: str | None = None,
    ) -> str:
        op: dict[str, Any] = {
            "op": "instantiate_with_deps",
            "cap": cap,
            "deps": {k: v if isinstance(v, str) else list(v) for k, v in (deps or {}).items()},
        }
        if explain is not None:
            op["explain"] = explain
        return self._add(op)

    def alias(self, alias: str, node: str | None = None) -> str:
        return self._add({"op": "alias", "alias": alias, "node": node})

    def detach_from_alias(self, alias: str) -> str:
        return self._add({"op": "detach_from_alias", "alias": alias})

    async def send(self) -> list[str | None]:
        """Apply the batch; one result per op (a node or alias name).

        :raises GraphGrowthError: refused (nothing was applied), or no graph to grow.
        """
        return await self._growth.grow(self.ops)


class GraphGrowth:
    """The four graph operations of a handler whose call runs in a graph (``req.graph``)."""

    def __init__(self, peer: Any, parent: MessageId | None) -> None:
        self._peer = peer
        self._parent = parent

    def batch(self) -> GraphBatch:
        return GraphBatch(self)

    async def grow(self, ops: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """Send raw ops (the wire form) as one batch; one result per op.

        :raises GraphGrowthError: refused, or the host has no graphs.
        """
        doc: dict[str, Any] = {"ops": list(ops)}
        if self._parent is not None:
            value = self._parent.value
            doc["parent"] = value.hex() if isinstance(value, bytes) else value
        payload = json.dumps(doc).encode("utf-8")
        try:
            response = await self._peer.call_with_bytes(GROW_GRAPH_CAP, [(_OPS_MEDIA, payload)])
            raw = await response.collect_bytes()
        except PeerCallError as exc:
            if exc.code == ErrorCode.NO_HANDLER:
                message = f"the host cannot grow graphs (NO_HANDLER): {exc.message}"
            else:
                message = exc.message
            raise GraphGrowthError(
                message, code=exc.code, attribution_class=exc.attribution_class
            ) from None
        results = json.loads(raw)["results"]
        return list(results)

    async def add_value_node(
        self, value: bytes | str, *, media: str, explain: str | None = None
    ) -> str:
        """Add a value node; its name."""
        return str((await self.grow([_value_op(value, media, explain)]))[0])

    async def instantiate_with_deps(
        self,
        cap: str,
        deps: Mapping[str, str | Sequence[str]] | None = None,
        *,
        explain: str | None = None,
    ) -> str:
        """Add a node calling ``cap``, each argument fed by the named sources; its name."""
        batch = self.batch()
        batch.instantiate_with_deps(cap, deps, explain=explain)
        return str((await batch.send())[0])

    async def alias(self, alias: str, node: str | None = None) -> str:
        """Append ``node`` to ``alias`` (None: only make sure it exists)."""
        return str((await self.grow([{"op": "alias", "alias": alias, "node": node}]))[0])

    async def detach_from_alias(self, alias: str) -> str:
        """Freeze ``alias`` for its readers now; the frozen copy's name."""
        return str((await self.grow([{"op": "detach_from_alias", "alias": alias}]))[0])
