"""Running a machine on the engine: the IO shell over the machine plan.

The plan (:func:`cartridge_runtime.machine.plan_machine`) decides what each step is given and
where it runs; this module only moves values and starts calls, through the engine's public
call API. A *scope instance* is the machine itself, or one item of a map; each holds a
:class:`NodeStream` per node that lives in it (and per node an inner map collects into it). Every
consumer takes its reader when the instance is set up, then every step, map and output runs
as a task of the instance:

* a step waits until each node it is given is decided; if one is absent it is skipped and its
  outputs are absent (MCH-12); otherwise it calls its cap, streaming a lone streamed input from
  its flow and the rest whole, and streams each output it takes into that output's flow;
* a map reads the sequences it zips item by item and runs one instance of its scope per item,
  at most ``window`` at once; what an item makes that is needed outside the map is handed on
  in item order;
* the machine's outputs are read as they are produced and become events.

The first step that fails cancels the run (every call in flight is cancelled, so CANCEL
reaches each cartridge) and the run raises :class:`MachineRunError`; a step with ``retry=N``
calls again after an environment-class failure (or ``OOM_KILLED``), after an exponential
backoff with jitter (``EngineConfig.retry_backoff``), and one with ``on_error=absent`` makes its
outputs absent instead of failing. Such steps hold their inputs and outputs whole, since a
stream cannot be sent twice.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ...machine import (
    Feed,
    FeedKind,
    Machine,
    OnError,
    RunPlan,
    ScopePlan,
    StepPlan,
    plan_machine,
)
from ...urn import MediaUrn, UrnError
from .._config import DEFAULT_WINDOW
from .._errors import CallError
from .._events import (
    CallEvent,
    Item,
    Log,
    OutputData,
    OutputEnded,
    OutputItem,
    OutputStarted,
    Progress,
)
from .._inputs import Verified
from .._output_check import OutputInvalid
from .._supervision._retry import Retry
from ._cache_step import StepCache, open_call, store_call
from ._events import (
    ItemFinished,
    ItemStarted,
    MachineEvent,
    MachineLog,
    MachineOutputData,
    MachineProgress,
    MachineRunError,
    StepFinished,
    StepStarted,
)
from ._inputs import check_inputs, feed_input
from ._node_stream import NodeCollector, NodeReader, NodeStream
from ._report import Reports
from ._scope import ScopeRun, Window, as_items, label_of
from ._step_call import CallInputs, StepTally
from ._step_inputs import step_inputs
from ._taps import given_back, with_taps


class _Events(Protocol):
    """A call's response, as a run reads it: its events in order (an ERR raises)."""

    def __aiter__(self) -> AsyncIterator[CallEvent]: ...


class Caller(Protocol):
    """What a run needs of the engine: its public call API."""

    def call(self, cap: str, inputs: Any = None) -> AbstractAsyncContextManager[_Events]: ...


__all__ = ("Caller", "MachineRunner", "DEFAULT_WINDOW")

_ABSENT: Final = object()


class MachineRunner:
    """One run of a machine (internal: :meth:`Engine.stream_machine` makes it)."""

    def __init__(
        self,
        engine: Caller,
        machine: Machine,
        inputs: Mapping[str, Any],
        events: MemoryObjectSendStream[MachineEvent] | None,
        window: int,
        keep_outputs: bool,
        observers: Sequence[Any] = (),
        *,
        cache: StepCache | None = None,
        taps: Sequence[str] | str = (),
    ) -> None:
        self.engine = engine
        self.machine = machine
        self.plan: RunPlan = plan_machine(machine)
        self.events = events
        self.window = max(1, window)
        self.inputs = check_inputs(machine, inputs)
        self.cache = cache
        #: Per strand, the nodes the run gives back: its outputs, then the taps asked for.
        self._given_back = given_back(machine, taps)
        self.reports = Reports(machine, keep_outputs)
        self._exported = with_taps(machine, self.plan.collected, self._given_back)
        #: The first step failure of the run (the one the run reports).
        self.failure: MachineRunError | None = None
        #: Who sees every event of the run (``Engine.add_observer``), with ``None`` when it
        #: starts and its reports, or its failure, when it ends.
        self._observers = tuple(observers)
        #: Per step, the node each output stream key (None: the main output) goes to.
        self._targets: dict[int, dict[str | None, str | None]] = {}

    # -- before anything starts -------------------------------------------------------------

    # -- the run ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run every strand; raises :class:`MachineRunError` for the first failing step."""
        self._observe(None)  # the run starts
        try:
            async with anyio.create_task_group() as tg:
                for root in self.plan.roots:
                    instance = ScopeRun(root, None, None, {})
                    self._setup(instance)
                    for node in self.machine.strands[root.strand].inputs:
                        tg.start_soon(
                            feed_input,
                            instance.flows[node],
                            self.inputs[node][1],
                            self.cache.store if self.cache is not None else None,
                        )
                    self._start(instance, tg)
        except BaseException as exc:
            self._observe(self.failure or exc)
            raise
        self.reports.finish()
        self._observe(self.reports)  # the run ended

    def _observe(self, event: Any) -> None:
        for observer in self._observers:
            try:
                observer.machine_event(self, event)
            except Exception as exc:  # an observer's fault never stops the run
                print(
                    f"engine: observer {type(observer).__name__} failed: {exc!r}", file=sys.stderr
                )

    def _setup(self, instance: ScopeRun) -> None:
        """Make the instance's flows and take every reader its tasks need."""
        sp = instance.scope
        flows = instance.flows
        for name in sp.nodes:
            flows[name] = NodeStream(name)
        for name in sorted(self._exported.get((sp.strand, sp.index), ())):
            flows[name] = NodeStream(name)
        for index, step in enumerate(sp.steps):
            instance.step_readers[index] = [
                (flows[f.node.name].reader() if f.streamed else flows[f.node.name].collector())
                if f.node is not None and f.kind in (FeedKind.LOCAL, FeedKind.COLLECTED)
                else None
                for f in step.feeds
            ]
        for child in sp.children:
            csp = self.plan.scope(sp.strand, child)
            instance.map_readers[child] = [flows[source].reader() for source in csp.sources]
            for step in self._steps_within(csp):
                for feed in step.feeds:
                    name = feed.node.name if feed.node is not None else ""
                    if (
                        feed.kind is FeedKind.OUTER
                        and name in sp.nodes
                        and name not in instance.wholes
                    ):
                        instance.wholes[name] = flows[name].collector()
        if instance.parent is not None:
            handed = self._exported.get((sp.strand, instance.parent.scope.index), frozenset())
            instance.exports = [(n, flows[n].collector()) for n in sorted(handed) if n in flows]
        else:
            instance.outputs = [(n, flows[n].reader()) for n in self._given_back[sp.strand]]

    def _steps_within(self, sp: ScopePlan) -> list[StepPlan]:
        steps = list(sp.steps)
        for child in sp.children:
            steps += self._steps_within(self.plan.scope(sp.strand, child))
        return steps

    def _start(self, instance: ScopeRun, tg: TaskGroup) -> None:
        sp = instance.scope
        for index, step in enumerate(sp.steps):
            tg.start_soon(self._run_step, instance, index, step)
        for child in sp.children:
            tg.start_soon(self._run_map, instance, self.plan.scope(sp.strand, child))
        for name, reader in instance.outputs:
            tg.start_soon(self._read_output, name, reader)

    async def _emit(self, event: MachineEvent) -> None:
        self.reports.on_event(event)
        if self._observers:
            self._observe(event)
        if self.events is None:
            return  # a run to the end: the reports are all that is kept
        try:
            self.events.send_nowait(event)
        except anyio.WouldBlock:
            await self.events.send(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The caller left its block (it raised, or broke out of its loop): the run is being
            # cancelled and there is nobody to tell; the cancel arrives at the next await.
            await anyio.lowlevel.checkpoint()

    async def _read_output(self, name: str, reader: NodeReader) -> None:
        label = label_of(self.machine, name)
        if not await reader.present():
            reader.close()
            self.reports.output_absent(label)
            return
        self.reports.output_present(label, self.machine.node(name))
        async for piece in reader.pieces():
            if isinstance(piece, Item):
                await self._emit(
                    MachineOutputData(
                        output=label, value=piece.value, is_item=True, meta=piece.meta
                    )
                )
            else:
                value = piece.data if type(piece) is Verified else piece
                await self._emit(MachineOutputData(output=label, value=value, is_item=False))

    # -- maps ---------------------------------------------------------------------------------

    async def _run_map(self, parent: ScopeRun, sp: ScopePlan) -> None:
        readers = parent.map_readers[sp.index]
        exported = sorted(self._exported.get((sp.strand, parent.scope.index), ()))
        mine = [n for n in exported if self._lives_within(sp, n)]
        outflows = [parent.flows[n] for n in mine]
        present = [await r.present() for r in readers]
        if not all(present):
            for reader in readers:
                reader.close()
            for flow in outflows:
                flow.absent()
            self._skip_all(sp, parent.item)
            return
        for flow in outflows:
            flow.start()
        name = self._map_name(sp)
        window = Window(self.window)
        done: dict[int, dict[str, list[Any] | None]] = {}
        # Handed on as items: a node made once per item is one item, a sequence its items.
        flatten = [
            self.machine.node(n).is_sequence or self.machine.node(n).scope != sp.index for n in mine
        ]
        state = {"flushed": 0, "flushing": False}
        iterators = [r.pieces().__aiter__() for r in readers]

        async def flush() -> None:
            # One flusher at a time; another one that finds it busy leaves the work to it (it
            # goes on while the next item in order is done).
            if state["flushing"]:
                return
            state["flushing"] = True
            try:
                while state["flushed"] in done:
                    values = done.pop(state["flushed"])
                    for node, flow, seq in zip(mine, outflows, flatten, strict=True):
                        pieces = values.get(node)
                        if pieces is not None:
                            for item in as_items(pieces, seq):
                                await flow.put(item)
                    state["flushed"] += 1
                    window.release()
            finally:
                state["flushing"] = False

        async def one(index: int, items: dict[str, Any]) -> None:
            await self._emit(ItemStarted(map=name, item=index))
            instance = ScopeRun(sp, parent, index, items)
            self._setup(instance)
            if len(sp.steps) == 1 and not sp.children:
                await self._run_step(instance, 0, sp.steps[0])  # the common case: no task
            else:
                async with anyio.create_task_group() as tg:
                    self._start(instance, tg)
            await self._emit(ItemFinished(map=name, item=index))
            done[index] = {node: c.value() for node, c in instance.exports}
            await flush()

        async with anyio.create_task_group() as tg:
            index = 0
            while True:
                items: dict[str, Any] = {}
                try:
                    for source, iterator in zip(sp.sources, iterators, strict=True):
                        items[source] = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                await window.acquire()
                self.reports.item_seen(sp)
                tg.start_soon(one, index, items)
                index += 1
            for reader in readers:
                reader.close()
        for flow in outflows:
            flow.close()

    def _lives_within(self, sp: ScopePlan, name: str) -> bool:
        strand = self.machine.strands[sp.strand]
        at = self.machine.node(name).scope
        while True:
            if at == sp.index:
                return True
            if at == 0:
                return False
            at = strand.scope_parents[at]

    def _map_name(self, sp: ScopePlan) -> str:
        opener = next((s for s in sp.steps if s.step.placement.map == sp.index), None)
        step = opener.step if opener is not None else (sp.steps[0].step if sp.steps else None)
        return (step.label or step.alias) if step is not None else f"map {sp.index}"

    def _skip_all(self, sp: ScopePlan, item: int | None) -> None:
        for step in self._steps_within(sp):
            self.reports.skipped(step.step)

    # -- steps --------------------------------------------------------------------------------

    async def _run_step(self, instance: ScopeRun, index: int, sp: StepPlan) -> None:
        step = sp.step
        label = step.label or step.alias
        readers = instance.step_readers[index]
        outflows = {o.node: instance.flows[o.node] for o in step.outputs}
        given: list[tuple[Feed, Any]] = []
        present = True
        for feed, reader in zip(sp.feeds, readers, strict=True):
            value = await self._given(instance, feed, reader)
            present = present and value is not _ABSENT
            given.append((feed, value))
        if not present:
            for reader in readers:
                if isinstance(reader, NodeReader):
                    reader.close()
            for flow in outflows.values():
                flow.absent()
            self.reports.skipped(step)
            await self._finished(label, instance.item, "skipped", time.monotonic())
            return
        attempts = 1 + step.policy.retry
        config = getattr(self.engine, "config", None)  # a test's fake engine has none
        retry = Retry(
            backoff=getattr(config, "retry_backoff", 0.5),
            max_delay=getattr(config, "retry_max_delay", 30.0),
        )
        started = time.monotonic()
        tally = StepTally()
        for attempt in range(attempts):
            await self._emit(StepStarted(step=label, cap=step.cap.text, item=instance.item))
            try:
                await self._call(instance, sp, given, outflows, tally)
            except CallError as error:
                self.reports.failed_call(step, time.monotonic() - started)
                if attempt + 1 < attempts and retry.covers(error.code, error.attribution_class):
                    await anyio.sleep(retry.delay(attempt + 1))
                    continue
                if step.policy.on_error is OnError.ABSENT:
                    for flow in outflows.values():
                        flow.absent()
                    self.reports.absent(step)
                    await self._finished(label, instance.item, "absent", started, tally)
                    return
                if isinstance(error, OutputInvalid):
                    error.step = label  # where in the machine the output came from
                failure = MachineRunError(label, step.cap.text, instance.item, error)
                if self.failure is None:
                    self.failure = failure
                raise failure from None
            break
        await self._finished(label, instance.item, "ok", started, tally)

    async def _finished(
        self,
        label: str,
        item: int | None,
        outcome: str,
        started: float,
        tally: StepTally | None = None,
    ) -> None:
        seconds = time.monotonic() - started
        tally = tally or StepTally()
        await self._emit(
            StepFinished(
                step=label,
                item=item,
                outcome=outcome,
                seconds=seconds,
                cache=tally.cache,
                bytes_in=tally.bytes_in,
                bytes_out=tally.bytes_out,
            )
        )
        overall = self.reports.overall()
        await self._emit(MachineProgress(step=label, item=item, fraction=1.0, overall=overall))

    async def _given(
        self, instance: ScopeRun, feed: Feed, reader: NodeReader | NodeCollector | None
    ) -> Any:
        """What a feed gives: a reader (streamed), whole pieces, an item, or _ABSENT."""
        if feed.node is None:
            return feed.binding.constant
        if feed.kind is FeedKind.ITEM:
            return ("item", instance.item_of(feed.node.name, feed.scope))
        if feed.kind is FeedKind.OUTER:
            pieces = await instance.whole_of(feed.node.name).whole()
            return _ABSENT if pieces is None else ("whole", pieces)
        if isinstance(reader, NodeCollector):
            pieces = await reader.whole()
            return _ABSENT if pieces is None else ("whole", pieces)
        assert reader is not None
        if not await reader.present():
            return _ABSENT
        return ("stream", reader)

    async def _call(
        self,
        instance: ScopeRun,
        sp: StepPlan,
        given: Sequence[tuple[Feed, Any]],
        outflows: Mapping[str, NodeStream],
        tally: StepTally,
    ) -> None:
        step = sp.step
        label = step.label or step.alias
        cache = self.cache
        call = CallInputs(
            tally, cache is not None and cache.applies(step.definition, step.policy.cache)
        )
        inputs = step_inputs(self.reports, sp, given, call)
        outputs = {o.node: o for o in step.outputs}
        targets = self._targets.setdefault(id(step), {})
        stream_to: dict[str, NodeStream | None] = {}
        call.stream_to = stream_to
        opened: set[str] = set()
        held: dict[str, list[Any]] = {}

        def target(key: str | None) -> str | None:
            if key in targets:
                return targets[key]
            try:
                urn = step.cap.out_spec if key is None else MediaUrn.parse(key)
            except UrnError:
                found = None
            else:
                found = next((n for n, o in outputs.items() if o.media.is_equivalent(urn)), None)
            targets[key] = found
            return found

        source = await open_call(self.engine, self.cache, step, inputs, call)
        try:
            async with source as response:
                if call.entry is None:
                    self.reports.call_started(step)
                async for ev in response:
                    kind = type(ev)
                    if kind is OutputData or kind is OutputItem:
                        flow = stream_to.get(ev.stream_id)
                        if flow is None:
                            continue
                        piece = (
                            Item(value=ev.value, meta=ev.meta) if kind is OutputItem else ev.value
                        )
                        tally.bytes_out += self.reports.count_out(step, piece)
                        if sp.buffered:
                            held[flow.name].append(piece)
                        else:
                            await flow.put(piece, ev.wire if kind is OutputData else None)
                    elif isinstance(ev, OutputStarted):
                        node = target(ev.output)
                        stream_to[ev.stream_id] = outflows[node] if node is not None else None
                        if node is not None:
                            opened.add(node)
                            outflows[node].digest = call.digest_of(ev.stream_id)
                            outflows[node].digest_later = call.writer is not None
                            if call.writer is not None:
                                outflows[node].stored_by = call.writer.lead(ev.stream_id)
                            elif self.cache is not None:
                                outflows[node].stored_by = call.source_of(
                                    ev.stream_id, self.cache.store.blob_path
                                )
                            if sp.buffered:
                                held.setdefault(node, [])
                            else:
                                outflows[node].start()
                    elif isinstance(ev, OutputEnded):
                        flow = stream_to.get(ev.stream_id)
                        if flow is not None and call.writer is not None:
                            flow.digest = call.writer.digest(ev.stream_id)
                        if flow is not None and not sp.buffered:
                            flow.close()
                    elif isinstance(ev, Progress):
                        fraction = self.reports.progress(step, instance.item, ev.progress)
                        await self._emit(
                            MachineProgress(
                                step=label,
                                item=instance.item,
                                fraction=ev.progress,
                                overall=fraction,
                                message=ev.message,
                            )
                        )
                    elif isinstance(ev, Log):
                        await self._emit(
                            MachineLog(
                                step=label, item=instance.item, level=ev.level, message=ev.message
                            )
                        )
        except BaseException:
            if call.writer is not None:
                call.writer.discard()
            raise
        finally:
            call.release()
        if call.entry is not None:
            self.reports.cache_hit(step)
        else:
            self.reports.call_finished(step, cached=call.writer is not None)
        await store_call(self.cache, step, call)
        for node, flow in outflows.items():
            if node in opened:
                if sp.buffered:
                    flow.start()
                    for piece in held[node]:
                        await flow.put(piece)
                flow.close()
            elif outputs[node].optional:
                flow.absent()
            else:
                flow.start()
                flow.close()
