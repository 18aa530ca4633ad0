"""The IO shell of a graph run: it asks the :class:`~cartridge_runtime.graph.Schedule` what
may start, calls each cap node through the engine's public call API, and reports back.

Each cap node's argument is an async stream that reads its sources one after another,
re-listing them (aliases expanded) each time one ends, so members appended to a live alias
before the reader reached its end are read too (GRW-4). A node's output pieces are kept in its
:class:`NodeFlows` and read by every reader from the first piece. A node's first output piece
is the schedule's ``produced`` input; its end, ``done`` or ``failed``. The run ends when the
schedule says nothing runs and nothing can start.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from ...graph import GraphModel, GraphNode, NodeKind, NodeState, Schedule
from ...protocol import AttributionClass, ErrorCode
from .._errors import CallError, NoRoute
from .._events import Item, OutputData, OutputEnded, OutputItem, OutputStarted
from .._inputs import ItemStream
from .._machines._cache_step import StepCache
from ._cache import NodeCall, cached_key, lookup_node_call, recorded, store_node_call
from ._flows import NodeFlows
from ._result import GraphResult, NodeResult

__all__ = ("GraphRunner", "Caller", "RunHooks")


class Caller(Protocol):
    def call(self, cap: str, inputs: Any = None) -> AbstractAsyncContextManager[Any]: ...


class RunHooks(Protocol):
    """What the session is told while a run goes: a node's call started (its response, to
    match growth requests to it) and ended; an event for the run's observers."""

    def call_started(self, node: str, response: Any) -> None: ...

    def call_ended(self, node: str, response: Any) -> None: ...

    def event(self, kind: str, node: str, **fields: Any) -> None: ...

    def has_grown(self, node: str) -> bool: ...


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return repr(value).encode("utf-8")


class GraphRunner:
    """One run of a graph toward its targets (internal: :meth:`Graph.run` makes it)."""

    def __init__(
        self,
        engine: Caller,
        model: GraphModel,
        schedule: Schedule,
        flows: dict[str, NodeFlows],
        hooks: RunHooks,
        arg_media: Callable[[GraphNode, str], Awaitable[str]],
        output_key: Callable[[GraphNode, str], str] = lambda node, name: name,
        cache: StepCache | None = None,
        resolve: Callable[[str], Awaitable[Any]] | None = None,
        arg_sequence: Callable[[GraphNode, str], bool] = lambda node, arg: False,
    ) -> None:
        self.engine = engine
        self.model = model
        self.schedule = schedule
        self.flows = flows
        self.hooks = hooks
        self._arg_media = arg_media
        self._output_key = output_key
        self.cache = cache
        self._resolve = resolve
        self._arg_sequence = arg_sequence
        self.errors: dict[str, CallError] = {}
        #: Per cap node run: ``hit``, ``miss`` or ``""`` (the step cache was not used).
        self.cached: dict[str, str] = {}
        self._wake = anyio.Event()

    def flows_of(self, name: str) -> NodeFlows:
        found = self.flows.get(name)
        if found is None:
            found = self.flows[name] = NodeFlows(name)
            node = self.model.nodes[name]
            if node.kind is NodeKind.VALUE:
                assert node.value is not None and node.media is not None
                found.start(None, node.media, False)
                found.put(None, node.value)
                found.finish()
        return found

    def changed(self) -> None:
        """The graph grew (or a node moved): decide again."""
        self._wake.set()

    async def run(self) -> GraphResult:
        started = time.perf_counter()
        schedule = self.schedule
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    for name in schedule.get_ready():
                        tg.start_soon(self._run_node, name, tg)
                    if not schedule.is_active():
                        break
                    await self._wake.wait()
                    self._wake = anyio.Event()
        except BaseException:
            schedule.stop("cancelled")
            for name, state in schedule.states.items():
                if state in (NodeState.RUNNING, NodeState.STREAMING):
                    schedule.failed(name, "cancelled")
            schedule.finish()
            raise
        schedule.finish()
        return self.result(time.perf_counter() - started)

    def result(self, seconds: float = 0.0) -> GraphResult:
        schedule = self.schedule
        nodes = {}
        for name, state in schedule.states.items():
            flows = self.flows.get(name)
            nodes[name] = NodeResult(
                name=name,
                state=state,
                outputs=flows.results() if flows is not None else {},
                error=self.errors.get(name),
                reason=schedule.reasons.get(name),
            )
        first = schedule.first_failure
        return GraphResult(
            nodes=nodes,
            error=self.errors.get(first[0]) if first is not None else None,
            failed_node=first[0] if first is not None else None,
            stopped=schedule.stopped,
            seconds=seconds,
        )

    # -- one node ----------------------------------------------------------------------------

    async def _run_node(self, name: str, tg: TaskGroup) -> None:
        node = self.model.nodes[name]
        flows = self.flows_of(name)
        self.hooks.event("node_started", name, cap=node.cap)
        error: CallError | None = None
        try:
            assert node.cap is not None
            if self._resolve is not None and (node.deps or self.cache is not None):
                # Its manifest shapes the arguments and the key; a cap no cartridge of the
                # engine serves may be a host's (the call routes it, or says NoRoute itself).
                with contextlib.suppress(NoRoute):
                    await self._resolve(node.cap)
            inputs: list[tuple[str, Any]] = []
            for index, dep in enumerate(node.deps):
                media = await self._arg_media(node, dep.arg)
                if self._arg_sequence(node, dep.arg):
                    inputs.append((media, ItemStream(self._feed_items(name, index))))
                else:
                    inputs.append((media, self._feed(name, index)))
            call = NodeCall()
            if self.cache is not None and self._resolve is not None:
                call.key = await cached_key(
                    self.cache,
                    self.model,
                    node,
                    [m for m, _ in inputs],
                    self.schedule.state,
                    self.flows_of,
                    self._output_key,
                )
            opened = None
            if call.key is not None and self.cache is not None:
                opened = await lookup_node_call(self.cache, node, call)
            if opened is None:
                opened = self.engine.call(node.cap, inputs)
            try:
                async with opened as response:
                    if call.cache != "hit":
                        self.hooks.call_started(name, response)
                    try:
                        await self._take(name, flows, recorded(response, call))
                    finally:
                        if call.cache != "hit":
                            self.hooks.call_ended(name, response)
            except BaseException:
                if self.cache is not None:
                    with anyio.CancelScope(shield=True):
                        await store_node_call(self.cache, call, False)
                raise
            if self.cache is not None:
                await store_node_call(self.cache, call, not self.hooks.has_grown(name))
            self.cached[name] = call.cache
        except CallError as exc:
            error = exc
        except anyio.get_cancelled_exc_class():
            flows.finish(
                CallError(ErrorCode.CANCELLED, AttributionClass.USER, f"node {name} cancelled")
            )
            raise
        if error is not None:
            self.errors[name] = error
            flows.finish(error)
            self.schedule.failed(name, f"{error.code}: {error.message}")
            self.hooks.event("node_failed", name, code=error.code, message=error.message)
        else:
            flows.finish()
            self.schedule.done(name)
            self.hooks.event("node_done", name, cache=self.cached.get(name, ""))
        self._wake.set()

    async def _take(self, name: str, flows: NodeFlows, response: Any) -> None:
        produced = False
        async for event in response:
            if isinstance(event, OutputData):
                flows.put(event.output, _as_bytes(event.value))
            elif isinstance(event, OutputItem):
                flows.put(event.output, Item(event.value, event.meta))
            elif isinstance(event, OutputStarted):
                flows.start(event.output, event.media_urn, event.is_sequence)
                continue
            elif isinstance(event, OutputEnded):
                flows.end(event.output)
                continue
            else:
                continue
            if not produced:
                produced = True
                self.schedule.produced(name)
                self._wake.set()

    def _sources(self, name: str, index: int, position: int) -> tuple[NodeFlows, Any] | None:
        """The flows and output key of source ``position`` of argument ``index`` of node
        ``name``, listed now (aliases expanded); None past the last."""
        pairs = self.model.expand(self.model.nodes[name].deps[index])
        if position >= len(pairs):
            return None
        source, output = pairs[position]
        flows = self.flows_of(source)
        if output is not None and output not in flows.flows:
            output = self._output_key(self.model.nodes[source], output)
        return flows, output

    async def _feed(self, name: str, index: int) -> AsyncIterator[bytes]:
        """Argument ``index`` of node ``name`` as bytes: its sources' bytes, one source after
        another, the sources re-listed each time one ends; the argument takes one value, so a
        sequence source's items are joined (GRW-17)."""
        position = 0
        while (found := self._sources(name, index, position)) is not None:
            position += 1
            flows, output = found
            async for piece in flows.pieces(output):
                if isinstance(piece, Item):
                    yield _as_bytes(piece.value)
                else:
                    yield piece

    async def _feed_items(self, name: str, index: int) -> AsyncIterator[Item]:
        """Argument ``index`` of node ``name`` as a sequence (GRW-17): each item of a sequence
        source is one item, with its meta; a scalar source is one item of its whole bytes."""
        position = 0
        while (found := self._sources(name, index, position)) is not None:
            position += 1
            flows, output = found
            joined: list[bytes] = []
            async for piece in flows.pieces(output):
                if isinstance(piece, Item):
                    yield piece
                else:
                    joined.append(piece)
            if joined:
                yield Item(b"".join(joined))
