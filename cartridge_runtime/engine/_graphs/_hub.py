"""Which calls run inside which graph, for the grow-graph cap (GRW-10).

A graph's runner registers each node's call (its request id and connection) while it runs; a
growth request from a cartridge finds here the graph and node it grows from. Kept apart from
:mod:`._grow` so that an engine holds one without importing the graph model until a growth
request or a graph run needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...protocol import MessageId

__all__ = ("GrowHub",)


def _rid_key(rid: MessageId) -> str | int:
    value = rid.value
    return value.hex() if isinstance(value, bytes) else int(value)


class GrowHub:
    """The graph calls in flight: request id -> (connection, graph, node)."""

    def __init__(self) -> None:
        self._calls: dict[str | int, tuple[object, Any, str]] = {}

    def register(self, rid: MessageId, connection: object, graph: Any, node: str) -> None:
        self._calls[_rid_key(rid)] = (connection, graph, node)

    def unregister(self, rid: MessageId) -> None:
        self._calls.pop(_rid_key(rid), None)

    def find(self, connection: object, parent: str | int | None) -> tuple[Any, str]:
        """The graph and node a growth request from ``connection`` grows from.

        :raises GraphRefused: no such call on that connection, or several and no parent.
        """
        from ...graph import GraphRefused, Refusal

        if parent is not None:
            hit = self._calls.get(parent)
            if hit is None or hit[0] is not connection:
                raise GraphRefused(
                    Refusal.NOT_HERE,
                    f"request {parent} is not a graph call this cartridge serves",
                )
            return hit[1], hit[2]
        mine = [(g, n) for c, g, n in self._calls.values() if c is connection]
        if not mine:
            raise GraphRefused(
                Refusal.NOT_HERE, "this cartridge serves no call that runs in a graph"
            )
        if len(mine) > 1:
            raise GraphRefused(
                Refusal.NOT_HERE,
                f"this cartridge serves {len(mine)} graph calls: name one with 'parent'",
            )
        return mine[0]
