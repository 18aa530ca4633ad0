"""The graph a run grows: value nodes, cap nodes, aliases, and the four operations on them.

A :class:`GraphModel` holds immutable :class:`GraphNode` values and alias member lists, and changes
only through the four operations (and :meth:`GraphModel.restore`, which puts a snapshot back).
Each operation checks everything first and refuses with :class:`GraphRefused` before it
changes anything, so a refused operation leaves the graph as it was.

Names (GRW-2): a node is ``<base>-<n>``, where ``<base>`` is ``value`` for a value node and the
cap's ``op`` tag (else ``cap``) for a cap node, and ``<n>`` comes from one counter of the graph
that frozen aliases share; a node's name never holds a ``.``, so ``node.output`` names one
named output of a cap node. An alias is any other non-empty name without white space; the
frozen copy :meth:`detach_from_alias` makes is ``<alias>@<n>``.

A cap node's argument is fed by a list of *sources*, read one after another as one input
(DAG-2): a node (its main output), ``node.output``, or an alias, whose members are read in
append order. A live alias is expanded whenever it is asked (readers and the scheduler see the
members it has then); a frozen one never changes (DAG-11).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

import attrs

from ..urn import CapUrn, UrnError
from ._errors import GraphRefused, Refusal

__all__ = (
    "GraphLimits",
    "GraphModel",
    "Dep",
    "GraphNode",
    "NodeKind",
    "Source",
    "Snapshot",
)

_NAME_SPACE: Final = re.compile(r"\s")
_BASE_CHARS: Final = re.compile(r"[^a-z0-9_-]+")


class NodeKind(enum.StrEnum):
    VALUE = "value"
    CAP = "cap"


@attrs.frozen
class GraphLimits:
    """What one graph may hold; past a limit an operation is refused (``Refusal.LIMIT``)."""

    max_nodes: int = 10_000
    max_value_bytes: int = 16 * 1024 * 1024
    max_ops_per_batch: int = 1_000
    max_alias_members: int = 10_000


@attrs.frozen
class Source:
    """One source of an argument: a node's output (``output`` None: its main one), or an
    alias (``output`` None), whose members' main outputs are read in order."""

    name: str
    output: str | None = None

    def __str__(self) -> str:
        return self.name if self.output is None else f"{self.name}.{self.output}"


@attrs.frozen
class Dep:
    """One argument of a cap node (a media URN or an argument name) and its sources."""

    arg: str
    sources: tuple[Source, ...]


@attrs.frozen
class GraphNode:
    """A node of the graph. A value node holds its bytes and media URN; a cap node its cap
    URN and dependencies. ``made_by`` names the node whose call added it (None: the
    application)."""

    name: str
    kind: NodeKind
    cap: str | None = None
    media: str | None = None
    value: bytes | None = attrs.field(default=None, repr=False)
    deps: tuple[Dep, ...] = ()
    explain: str | None = None
    made_by: str | None = None


@attrs.frozen
class Snapshot:
    """The whole state of a model, to put back with :meth:`GraphModel.restore`."""

    nodes: Mapping[str, GraphNode]
    aliases: Mapping[str, tuple[str, ...]]
    frozen: frozenset[str]
    counter: int
    version: int


class GraphModel:
    """The nodes and aliases of one graph, and the four operations (sans-IO).

    :ivar version: counts every change of nodes or aliases (a scheduler re-resolves when it
        moves, GRW-5).
    """

    def __init__(self, limits: GraphLimits | None = None) -> None:
        self.limits = limits or GraphLimits()
        self._nodes: dict[str, GraphNode] = {}
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._frozen: set[str] = set()
        self._counter = 0
        self.version = 0

    # -- reading ----------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, GraphNode]:
        """Every node by name, in the order they were added."""
        return self._nodes

    @property
    def aliases(self) -> Mapping[str, tuple[str, ...]]:
        """Every alias (frozen ones too) and its members, in the order they were made."""
        return self._aliases

    def is_frozen(self, alias: str) -> bool:
        return alias in self._frozen

    def has(self, name: str) -> bool:
        """Whether ``name`` is a node or an alias."""
        return name in self._nodes or name in self._aliases

    def node(self, name: str) -> GraphNode:
        """:raises GraphRefused: no node of that name."""
        found = self._nodes.get(name)
        if found is None:
            raise GraphRefused(Refusal.UNKNOWN_NAME, f"no node named {name!r}")
        return found

    def expand(self, dep: Dep) -> list[tuple[str, str | None]]:
        """The ``(node, output)`` pairs ``dep`` reads now, in order, aliases expanded (a pair
        repeated within the argument is read once)."""
        out: list[tuple[str, str | None]] = []
        seen: set[tuple[str, str | None]] = set()
        for source in dep.sources:
            if source.name in self._aliases:
                pairs: Iterable[tuple[str, str | None]] = (
                    (m, None) for m in self._aliases[source.name]
                )
            else:
                pairs = ((source.name, source.output),)
            for pair in pairs:
                if pair not in seen:
                    seen.add(pair)
                    out.append(pair)
        return out

    def inputs_of(self, name: str) -> list[str]:
        """The nodes ``name`` reads now (aliases expanded), each once, in order."""
        node = self._nodes[name]
        if not node.deps:
            return []
        seen: dict[str, None] = {}
        for dep in node.deps:
            for source, _ in self.expand(dep):
                seen[source] = None
        return list(seen)

    def readers_of_alias(self, alias: str) -> list[str]:
        """The nodes with a source naming ``alias`` itself."""
        return [
            n.name
            for n in self._nodes.values()
            if any(s.name == alias for d in n.deps for s in d.sources)
        ]

    def upstream(self, names: Iterable[str]) -> set[str]:
        """Every node the given nodes read, directly or not (the given ones included)."""
        todo = list(names)
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen or name not in self._nodes:
                continue
            seen.add(name)
            todo.extend(self.inputs_of(name))
        return seen

    def sinks(self) -> list[str]:
        """The nodes nothing reads (a run's default targets)."""
        read: set[str] = set()
        for name in self._nodes:
            read.update(self.inputs_of(name))
        return [name for name in self._nodes if name not in read]

    def resolve(self, ref: str) -> Source:
        """The :class:`Source` a reference names: a node, an alias, or ``node.output``.

        :raises GraphRefused: nothing of that name.
        """
        if not isinstance(ref, str) or not ref:
            raise GraphRefused(Refusal.BAD_OP, f"a source is a non-empty name, not {ref!r}")
        if ref in self._nodes or ref in self._aliases:
            return Source(ref)
        node, dot, output = ref.rpartition(".")
        if dot and output and node in self._nodes:
            if self._nodes[node].kind is NodeKind.VALUE:
                raise GraphRefused(
                    Refusal.UNKNOWN_NAME, f"value node {node!r} has no output {output!r}"
                )
            return Source(node, output)
        raise GraphRefused(Refusal.UNKNOWN_NAME, f"no node or alias named {ref!r}")

    # -- the four operations ------------------------------------------------------------------

    def add_value_node(
        self,
        value: bytes,
        *,
        media: str,
        explain: str | None = None,
        made_by: str | None = None,
    ) -> str:
        """Add a finished value node holding ``value``; its name.

        :raises GraphRefused: the value is too large, the media URN is empty, or the graph
            is full.
        """
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise GraphRefused(Refusal.BAD_OP, "a value is bytes")
        if len(value) > self.limits.max_value_bytes:
            raise GraphRefused(
                Refusal.LIMIT,
                f"a value of {len(value)} bytes is over the limit of {self.limits.max_value_bytes}",
            )
        if not isinstance(media, str) or not media.startswith("media:"):
            raise GraphRefused(Refusal.BAD_OP, f"a value's media is a media URN, not {media!r}")
        self._check_room()
        name = self._new_name("value")
        self._put(
            GraphNode(
                name,
                NodeKind.VALUE,
                media=media,
                value=bytes(value),
                explain=explain,
                made_by=made_by,
            )
        )
        return name

    def instantiate_with_deps(
        self,
        cap: str,
        deps: Mapping[str, str | Sequence[str]] | None = None,
        *,
        explain: str | None = None,
        made_by: str | None = None,
    ) -> str:
        """Add a cap node calling ``cap``, each argument fed by the named sources; its name.

        A new node reads only what exists already and nothing reads it yet, so it cannot close
        a cycle.

        :raises GraphRefused: a source that names nothing, a malformed cap URN or argument,
            or the graph is full.
        """
        try:
            parsed = CapUrn.parse(cap)
        except (UrnError, TypeError) as exc:
            raise GraphRefused(Refusal.BAD_OP, f"not a cap URN: {cap!r} ({exc})") from None
        made: list[Dep] = []
        for arg, refs in (deps or {}).items():
            if not isinstance(arg, str) or not arg:
                raise GraphRefused(Refusal.BAD_OP, f"an argument is a non-empty name: {arg!r}")
            ref_list = [refs] if isinstance(refs, str) else list(refs)
            made.append(Dep(arg, tuple(self.resolve(r) for r in ref_list)))
        self._check_room()
        base = _BASE_CHARS.sub("_", (parsed.get_tag("op") or "cap").lower()).strip("_-")
        name = self._new_name(base or "cap")
        self._put(
            GraphNode(
                name,
                NodeKind.CAP,
                cap=str(cap),
                deps=tuple(made),
                explain=explain,
                made_by=made_by,
            )
        )
        return name

    def alias(self, alias: str, node: str | None = None) -> str:
        """Append ``node`` to ``alias`` (made if new); with None only make sure it exists.
        Returns the alias name.

        :raises GraphRefused: a bad alias name (a node's, or frozen), an unknown node, too many
            members, or an append that would close a cycle (a node reading the alias would
            come to read itself).
        """
        if not isinstance(alias, str) or not alias or _NAME_SPACE.search(alias):
            raise GraphRefused(Refusal.BAD_OP, f"an alias is a name without spaces: {alias!r}")
        if alias in self._nodes:
            raise GraphRefused(Refusal.NAME_TAKEN, f"{alias!r} is a node, not an alias")
        if alias in self._frozen:
            raise GraphRefused(Refusal.FROZEN, f"alias {alias!r} is frozen")
        members = self._aliases.get(alias, ())
        if node is None:
            if alias not in self._aliases:
                self._aliases[alias] = ()
                self.version += 1
            return alias
        if node not in self._nodes:
            what = "an alias; aliases hold nodes" if node in self._aliases else "unknown"
            raise GraphRefused(Refusal.UNKNOWN_NAME, f"{node!r} is {what}")
        if len(members) >= self.limits.max_alias_members:
            raise GraphRefused(Refusal.LIMIT, f"alias {alias!r} is full")
        readers = self.readers_of_alias(alias)
        if readers:
            above = self.upstream([node])
            looped = [r for r in readers if r in above]
            if looped:
                raise GraphRefused(
                    Refusal.CYCLE,
                    f"appending {node!r} to {alias!r} closes a cycle: {looped[0]!r} reads "
                    f"{alias!r} and {node!r} reads {looped[0]!r}",
                )
        self._aliases[alias] = (*members, node)
        self.version += 1
        return alias

    def detach_from_alias(self, alias: str) -> str:
        """Freeze ``alias`` for the nodes that name it now (DAG-11): a frozen copy of its
        members is made, and every source naming ``alias`` now names the copy; the alias
        itself keeps its members and keeps growing. Returns the copy's name.

        :raises GraphRefused: no such alias.
        """
        if alias not in self._aliases:
            raise GraphRefused(Refusal.UNKNOWN_NAME, f"no alias named {alias!r}")
        self._counter += 1
        frozen = f"{alias}@{self._counter}"
        self._aliases[frozen] = self._aliases[alias]
        self._frozen.add(frozen)
        for node in list(self._nodes.values()):
            if any(s.name == alias for d in node.deps for s in d.sources):
                deps = tuple(
                    Dep(
                        d.arg,
                        tuple(Source(frozen) if s.name == alias else s for s in d.sources),
                    )
                    for d in node.deps
                )
                self._nodes[node.name] = attrs.evolve(node, deps=deps)
        self.version += 1
        return frozen

    # -- snapshots and loading ---------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return Snapshot(
            dict(self._nodes),
            dict(self._aliases),
            frozenset(self._frozen),
            self._counter,
            self.version,
        )

    def restore(self, snap: Snapshot) -> None:
        """Put back the state ``snap`` holds (a refused batch undone)."""
        self._nodes = dict(snap.nodes)
        self._aliases = dict(snap.aliases)
        self._frozen = set(snap.frozen)
        self._counter = snap.counter
        self.version = snap.version

    def load(
        self,
        nodes: Iterable[GraphNode],
        aliases: Mapping[str, Sequence[str]],
        frozen: Iterable[str],
        counter: int,
    ) -> None:
        """Replace the graph with the given parts (:func:`load_graph` checks them first)."""
        self._nodes = {n.name: n for n in nodes}
        self._aliases = {k: tuple(v) for k, v in aliases.items()}
        self._frozen = set(frozen)
        self._counter = counter
        self.version += 1

    @property
    def counter(self) -> int:
        return self._counter

    def __iter__(self) -> Iterator[GraphNode]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    # -- helpers ------------------------------------------------------------------------------

    def _check_room(self) -> None:
        if len(self._nodes) >= self.limits.max_nodes:
            raise GraphRefused(Refusal.LIMIT, f"the graph is full ({self.limits.max_nodes} nodes)")

    def _new_name(self, base: str) -> str:
        while True:
            self._counter += 1
            name = f"{base}-{self._counter}"
            if name not in self._aliases:
                return name

    def _put(self, node: GraphNode) -> None:
        self._nodes[node.name] = node
        self.version += 1
