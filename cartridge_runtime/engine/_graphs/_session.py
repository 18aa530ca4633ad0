"""``async with engine.graph(...) as g``: a graph, its operations, its runs.

The session owns one :class:`~cartridge_runtime.graph.GraphModel` and the outputs its nodes
made; the four operations change the model (refused with
:class:`~cartridge_runtime.graph.GraphRefused` before anything changes), :meth:`Graph.run`
runs it to the end with :class:`GraphRunner`, and while a node's call runs the cartridge
serving it may grow the same graph through the grow-graph cap (:mod:`._grow`). Leaving the
block cancels a run still going and ends the session's growth.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...graph import (
    Batch,
    GraphLimits,
    GraphModel,
    GraphNode,
    GraphRefused,
    NodeState,
    Refusal,
    Schedule,
    apply_batch,
    dump_graph,
    load_graph,
    parse_batch,
    render_html,
    render_tree,
)
from ...urn import CapUrn, UrnError
from .._events import Item
from .._machines._api import step_cache
from ._flows import NodeFlows
from ._result import GraphResult
from ._runner import Caller, GraphRunner

__all__ = ("Graph", "Catalogue")


class Catalogue:
    """Cartridges a graph may activate while it runs (off unless given to ``engine.graph``).

    :param offered: cartridge name -> the cap URNs it serves (from discovery, say).
    :param approve: called with a cartridge name when a graph asks for it; True lets it in.
        Without it, every offered cartridge is approved.
    :param add: called with a cartridge name once it is approved, to host it (say,
        ``engine.add_cartridge``); None when the engine hosts them already.

    Until activated, a catalogue cartridge's caps are refused to the graph
    (``Refusal.NO_CAP``); the engine's other cartridges stay callable.
    """

    def __init__(
        self,
        offered: Mapping[str, Iterable[str]],
        approve: Callable[[str], bool] | None = None,
        add: Callable[[str], Any] | None = None,
    ) -> None:
        self.offered = {name: tuple(caps) for name, caps in offered.items()}
        self.approve = approve
        self.add = add


class Graph:
    """One graph on an engine (see :meth:`Engine.graph`)."""

    def __init__(
        self,
        engine: Caller,
        *,
        hub: Any,
        route: Callable[[str], str | None],
        manifest_of: Callable[[str], Any],
        limits: GraphLimits | None = None,
        load: Any = None,
        catalogue: Catalogue | None = None,
        observers: Sequence[Any] = (),
        cache: Any = None,
        resolve: Any = None,
    ) -> None:
        self._engine = engine
        #: The step cache cap nodes are looked up in and stored into (None: none).
        self.cache = step_cache(engine, cache)
        self._resolve = resolve
        self._hub = hub
        self._route = route
        self._manifest_of = manifest_of
        self.catalogue = catalogue
        #: Caps the graph may call besides those of the cartridges the engine hosts: those of
        #: the catalogue's cartridges activated so far.
        self.activated: dict[str, tuple[str, ...]] = {}
        self._observers = tuple(observers)
        self._flows: dict[str, NodeFlows] = {}
        self._states: dict[str, NodeState] = {}
        self._reasons: dict[str, str] = {}
        self._runner: GraphRunner | None = None
        self._growers: set[str] = set()
        #: Every operation applied, with the node whose call made it (None: the application).
        self.log: list[dict[str, Any]] = []
        if load is not None:
            self.model, self._states, kept = load_graph(load, limits)
            for name, outputs in kept.items():
                self._flows[name] = _restore_flows(name, outputs)
        else:
            self.model = GraphModel(limits)

    # -- the four operations -------------------------------------------------------------------

    def add_value_node(self, value: bytes | str, *, media: str, explain: str | None = None) -> str:
        """Add a value node (text is stored as UTF-8); its name."""
        data = value.encode("utf-8") if isinstance(value, str) else value
        name = self.model.add_value_node(data, media=media, explain=explain)
        self._logged("add_value_node", None, name, media=media)
        return name

    def instantiate_with_deps(
        self,
        cap: str,
        deps: Mapping[str, str | Sequence[str]] | None = None,
        *,
        explain: str | None = None,
    ) -> str:
        """Add a node calling ``cap``; ``deps`` maps each argument (its media URN or its name)
        to a node, ``node.output``, an alias, or a list of them. Its name.

        :raises GraphRefused: an unknown name, a malformed cap, or a cap this graph may not
            call.
        """
        self.check_cap(cap)
        name = self.model.instantiate_with_deps(cap, deps, explain=explain)
        self._logged("instantiate_with_deps", None, name, cap=cap)
        return name

    def alias(self, alias: str, node: str | None = None) -> str:
        """Append ``node`` to ``alias`` (made when new); None only makes sure it exists."""
        result = self.model.alias(alias, node)
        self._logged("alias", None, result, member=node)
        return result

    def detach_from_alias(self, alias: str) -> str:
        """Freeze ``alias`` for the nodes that read it now; the frozen copy's name."""
        result = self.model.detach_from_alias(alias)
        self._logged("detach_from_alias", None, result, alias=alias)
        return result

    def grow(self, batch: Any, *, made_by: str | None = None) -> list[str | None]:
        """Apply a batch of operations (the grow-graph cap's ``{"ops": [...]}``) whole or not
        at all; one result per op.

        :raises GraphRefused: the first op refused (naming its index); nothing changed.
        """
        parsed = (
            batch
            if isinstance(batch, Batch)
            else parse_batch(batch, self.model.limits.max_ops_per_batch)
        )
        activated = dict(self.activated)
        try:
            results = apply_batch(
                self.model,
                parsed,
                made_by=made_by,
                check_cap=self.check_cap,
                activate=self.activate if self.catalogue is not None else None,
            )
        except GraphRefused:
            self.activated = activated  # whole or nothing: its activations too (GRW-16)
            raise
        if made_by is not None:
            self._growers.add(made_by)
        for op, result in zip(parsed.ops, results, strict=True):
            self._logged(op.kind.value, made_by, result)
        if self._runner is not None:
            self._runner.changed()
        return results

    def activate(self, cartridge: str) -> tuple[str, ...]:
        """Let nodes instantiated from now on call the caps of ``cartridge``, one of the
        catalogue's, if the catalogue approves it; the caps it serves.

        :raises GraphRefused: no catalogue, a cartridge it does not offer, or not approved.
        """
        cat = self.catalogue
        if cat is None or cartridge not in cat.offered:
            raise GraphRefused(Refusal.NO_CAP, f"cartridge {cartridge!r} is not offered")
        if cartridge not in self.activated:
            if cat.approve is not None and not cat.approve(cartridge):
                raise GraphRefused(Refusal.NO_CAP, f"cartridge {cartridge!r} was not approved")
            if cat.add is not None:
                cat.add(cartridge)
            self.activated[cartridge] = cat.offered[cartridge]
            self._logged("activate", None, cartridge)
        return self.activated[cartridge]

    def check_cap(self, cap: str) -> None:
        """:raises GraphRefused: a cap that a catalogue cartridge not activated serves (the
        graph may call the engine's other cartridges as always)."""
        if self.catalogue is None:
            return
        try:
            wanted = CapUrn.parse(cap)
            gated = [
                text
                for name, caps in self.catalogue.offered.items()
                if name not in self.activated
                for text in caps
            ]
            if any(CapUrn.parse(text).accepts(wanted) for text in gated):
                allowed = [t for caps in self.activated.values() for t in caps]
                if not any(CapUrn.parse(text).accepts(wanted) for text in allowed):
                    raise GraphRefused(
                        Refusal.NO_CAP, f"{cap} is served by a cartridge not activated"
                    )
        except UrnError as exc:
            raise GraphRefused(Refusal.BAD_OP, f"not a cap URN: {cap!r} ({exc})") from None

    # -- runs ------------------------------------------------------------------------------

    async def run(
        self,
        target: str | Sequence[str] | None = None,
        *,
        stop_before: Iterable[str] = (),
        one_step: bool = False,
    ) -> GraphResult:
        """Run the graph until nothing runs and nothing can start; nodes finished before (in
        an earlier run, or loaded) are not run again.

        :param target: the node(s) to make, and what they read; default: every node nothing
            reads (as the graph grows).
        :param stop_before: end the run before starting any of these nodes.
        :param one_step: start one node, then end the run.
        :returns: every node's state, outputs and error; ``error`` is the first failure.
        """
        if self._runner is not None:
            raise RuntimeError("this graph is already running")
        targets = [target] if isinstance(target, str) else target
        for t in targets or ():
            self.model.node(t)
        schedule = Schedule(
            self.model,
            targets,
            states=self._states,
            stop_before=stop_before,
            one_step=one_step,
            streaming=self.cache is None,
        )
        runner = GraphRunner(
            self._engine,
            self.model,
            schedule,
            self._flows,
            self,
            self._arg_media,
            self._output_key,
            self.cache,
            self._resolve,
            self._arg_sequence,
        )
        self._runner = runner
        try:
            result = await runner.run()
        finally:
            self._runner = None
            self._states = dict(schedule.states)
            self._reasons = dict(schedule.reasons)
        return result

    # -- the session's hooks (RunHooks) -------------------------------------------------------

    def call_started(self, node: str, response: Any) -> None:
        self._hub.register(response.rid, response.connection, self, node)

    def call_ended(self, node: str, response: Any) -> None:
        self._hub.unregister(response.rid)

    def has_grown(self, node: str) -> bool:
        """Whether ``node``'s call grew the graph (such a call is never stored in the cache:
        a replay would not grow it again)."""
        return node in self._growers

    def event(self, kind: str, node: str, **fields: Any) -> None:
        entry = {"event": kind, "node": node, "at": time.time(), **fields}
        self.log.append(entry)
        for observer in self._observers:
            with contextlib.suppress(Exception):  # an observer's fault never stops the run
                observer(entry)

    # -- looking at it -----------------------------------------------------------------------

    def state(self, name: str) -> NodeState:
        if self._runner is not None:
            return self._runner.schedule.state(name)
        node = self.model.node(name)
        return self._states.get(name) or (
            NodeState.DONE if node.kind.value == "value" else NodeState.WAITING
        )

    def tree(self, node: str | Sequence[str] | None = None) -> str:
        """The graph drawn as a tree from ``node`` (default: every node nothing reads)."""
        roots = [node] if isinstance(node, str) else list(node or self.model.sinks())
        reasons = self._runner.schedule.reasons if self._runner is not None else self._reasons
        return render_tree(self.model, roots, self.state, reasons)

    def dump(self) -> dict[str, Any]:
        """The whole graph as a JSON-able document, with each node's state and the outputs of
        finished nodes, so ``engine.graph(load=doc)`` resumes it."""
        states = {name: self.state(name) for name in self.model.nodes}
        outputs = {
            name: _dump_flows(flows)
            for name, flows in self._flows.items()
            if states.get(name) is NodeState.DONE and self.model.nodes[name].kind.value == "cap"
        }
        return dump_graph(self.model, states, reasons=self._reasons, outputs=outputs)

    def dumps(self) -> str:
        return json.dumps(self.dump(), ensure_ascii=False)

    def report(self, title: str = "graph") -> str:
        """A self-contained HTML page: the grown graph drawn, the tree, every node's state,
        the aliases, and the log of operations and node events."""
        reasons = self._runner.schedule.reasons if self._runner is not None else self._reasons
        return render_html(self.model, self.state, reasons=reasons, log=self.log, title=title)

    def write_record(self, folder: str | os.PathLike[str]) -> Path:
        """Write the graph's record into ``folder`` (made if needed): ``graph.json`` (what
        ``engine.graph(load=...)`` resumes), ``events.jsonl`` (every operation with the node
        that made it, every node's start and end) and ``report.html``. Returns the folder."""
        where = Path(folder)
        where.mkdir(parents=True, exist_ok=True)
        (where / "graph.json").write_text(self.dumps(), encoding="utf-8")
        lines = (json.dumps(e, ensure_ascii=False, default=str) for e in self.log)
        (where / "events.jsonl").write_text("".join(f"{line}\n" for line in lines), "utf-8")
        (where / "report.html").write_text(self.report(where.name), encoding="utf-8")
        return where

    # -- helpers ---------------------------------------------------------------------------------

    def _logged(self, op: str, made_by: str | None, result: Any, **fields: Any) -> None:
        self.event("op", made_by or "", op=op, result=result, **fields)

    def _cap_def(self, node: GraphNode) -> Any:
        assert node.cap is not None
        owner = self._route(node.cap)
        manifest = self._manifest_of(owner) if owner is not None else None
        return manifest.find_cap(node.cap) if manifest is not None else None

    def _output_key(self, node: GraphNode, name: str) -> str:
        """The stream key of ``node``'s output called ``name`` in its cap's definition (its
        media URN), or ``name`` itself."""
        cap_def = self._cap_def(node) if node.cap is not None else None
        for out in getattr(cap_def, "outputs", ()):
            if out.name == name:
                return str(out.media_urn)
        return name

    async def _arg_media(self, node: GraphNode, arg: str) -> str:
        if arg.startswith("media:"):
            return arg
        cap_def = self._cap_def(node)
        if cap_def is not None:
            for a in cap_def.args:
                if a.name == arg:
                    return str(a.media_urn)
        raise GraphRefused(
            Refusal.UNKNOWN_NAME, f"node {node.name}: cap {node.cap} has no argument {arg!r}"
        )

    def _arg_sequence(self, node: GraphNode, arg: str) -> bool:
        """Whether ``node``'s cap declares its argument ``arg`` (a name or a media URN) a
        sequence."""
        cap_def = self._cap_def(node)
        for a in getattr(cap_def, "args", ()):
            if arg in (a.name, str(a.media_urn)):
                return bool(a.is_sequence)
        return False


def _dump_flows(flows: NodeFlows) -> dict[str, Any]:
    out = {}
    for key, flow in flows.flows.items():
        entry: dict[str, Any] = {"media": flow.media_urn, "sequence": flow.is_sequence}
        if flow.is_sequence:
            entry["items"] = [
                base64.b64encode(
                    item.value if isinstance(item.value, bytes) else str(item.value).encode()
                ).decode("ascii")
                for item in flow.pieces
            ]
        else:
            entry["data"] = base64.b64encode(b"".join(flow.pieces)).decode("ascii")
        out["" if key is None else key] = entry
    return out


def _restore_flows(name: str, outputs: Mapping[str, Any]) -> NodeFlows:
    flows = NodeFlows(name)
    for key, entry in outputs.items():
        output = None if key == "" else key
        flows.start(output, str(entry.get("media", "media:")), bool(entry.get("sequence")))
        if entry.get("sequence"):
            for raw in entry.get("items", []):
                flows.put(output, Item(base64.b64decode(raw)))
        else:
            flows.put(output, base64.b64decode(entry.get("data", "")))
        flows.end(output)
    flows.finish()
    return flows
