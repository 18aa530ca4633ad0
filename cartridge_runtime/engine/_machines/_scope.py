"""The places a machine run keeps its values: scope instances, the map window, item forms.

A :class:`ScopeRun` is one scope instance of a run (the machine itself, or one item of a map):
the flows of the nodes that live in it, the items of the maps it is inside, and the readers its
tasks took. :class:`Window` bounds the items of one map in flight. The helpers turn an item into
a call input and a value's pieces into items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ...machine import Machine, ScopePlan
from .._events import Item
from .._inputs import CborValue
from ._node_stream import NodeCollector, NodeReader, NodeStream, whole_value

__all__ = ("ScopeRun", "Window", "label_of", "item_value", "as_items")


def label_of(machine: Machine, name: str) -> str:
    node = machine.node(name)
    return node.label or node.name


def item_value(item: Any) -> Any:
    """An item given to an arg that takes one value, as a call input."""
    value = item.value if isinstance(item, Item) else item
    if isinstance(value, bytes | str):
        return value
    return CborValue(value)


def as_items(pieces: list[Any], is_sequence: bool) -> list[Item]:
    if is_sequence:
        return [p if isinstance(p, Item) else Item(value=p) for p in pieces]
    return [Item(value=whole_value(pieces))]


class Window:
    """At most ``size`` items of a map in flight, or done and waiting to be handed on in item
    order (so memory stays bounded however slow the first item is)."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._wakeup: anyio.Event | None = None

    async def acquire(self) -> None:
        while self.free == 0:
            self._wakeup = anyio.Event()
            await self._wakeup.wait()
        self.free -= 1

    def release(self) -> None:
        self.free += 1
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None


class ScopeRun:
    """One scope instance: the machine itself, or one item of a map."""

    def __init__(
        self, scope: ScopePlan, parent: ScopeRun | None, item: int | None, items: Mapping[str, Any]
    ) -> None:
        self.scope = scope
        self.parent = parent
        self.item = item
        self.items = dict(items)
        self.flows: dict[str, NodeStream] = {}
        #: Whole values of this instance that steps of inner instances take (OUTER feeds).
        self.wholes: dict[str, NodeCollector] = {}
        #: Each step's readers, one per feed: a reader for a streamed feed, a collector for a
        #: whole one, None where the feed reads no flow here.
        self.step_readers: dict[int, list[NodeReader | NodeCollector | None]] = {}
        #: Each inner map's readers of the sequences it zips.
        self.map_readers: dict[int, list[NodeReader]] = {}
        #: Readers of what this item hands to the enclosing instance, by node.
        self.exports: list[tuple[str, NodeCollector]] = []
        #: Readers of the machine's outputs (the machine's own instance only).
        self.outputs: list[tuple[str, NodeReader]] = []

    def item_of(self, name: str, scope: int) -> Any:
        """The current item of ``name`` in the enclosing instance of map ``scope``."""
        at: ScopeRun | None = self
        while at is not None:
            if at.scope.index == scope and name in at.items:
                return at.items[name]
            at = at.parent
        raise KeyError(name)

    def whole_of(self, name: str) -> NodeCollector:
        """The whole-value collector of ``name`` in the enclosing instance it lives in."""
        at: ScopeRun | None = self
        while at is not None:
            if name in at.wholes:
                return at.wholes[name]
            at = at.parent
        raise KeyError(name)
