"""The scheduler of a graph run as data: it decides, the caller runs.

:class:`Schedule` has the shape of :class:`graphlib.TopologicalSorter` (``get_ready``,
``done``, ``is_active``) with the inputs a growing graph needs besides: a node produced its
first bytes (:meth:`Schedule.produced`), a node failed (:meth:`Schedule.failed`), and the graph
changed (it reads :attr:`GraphModel.version` on every call, so a change of nodes *or* of
aliases is seen at once, GRW-5). It never does IO and never waits.

The start rule (GRW-4, after DAG-34): a node that the run's targets reach starts when every
node it reads now (aliases expanded) has finished, or has started and produced bytes; an empty
alias contributes nothing. A node reading a failed or skipped node is skipped, with a reason
naming the failed node (GRW-8). The run is over when nothing runs and nothing can start.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from ._model import GraphModel, NodeKind

__all__ = ("NodeState", "Schedule")


class NodeState(enum.StrEnum):
    WAITING = "waiting"  #: not started (its inputs are not ready, or the run is not reaching it)
    RUNNING = "running"  #: handed out, no output byte yet
    STREAMING = "streaming"  #: running, and it produced bytes (its readers may start)
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"  #: never started: something it reads failed, or the run was stopped


_FINISHED = frozenset({NodeState.DONE, NodeState.FAILED, NodeState.SKIPPED})
_BROKEN = frozenset({NodeState.FAILED, NodeState.SKIPPED})
_FEEDING = frozenset({NodeState.DONE, NodeState.STREAMING})


class Schedule:
    """Which nodes of ``model`` start when, toward ``targets`` (default: every node nothing
    reads, recomputed as the graph grows).

    :param states: states carried over (a loaded graph): finished nodes stay finished;
        anything else waits again.
    :param stop_before: nodes never to start; reaching one ends the run (DAG-40).
    :param one_step: hand out one node, then end the run.
    :param streaming: a reader may start at its inputs' first bytes; False: only once they
        finished (a run whose nodes are cached needs their inputs whole).
    """

    def __init__(
        self,
        model: GraphModel,
        targets: Iterable[str] | None = None,
        *,
        states: Mapping[str, NodeState] | None = None,
        stop_before: Iterable[str] = (),
        one_step: bool = False,
        streaming: bool = True,
    ) -> None:
        self.model = model
        self._feeding = _FEEDING if streaming else frozenset({NodeState.DONE})
        self._targets = tuple(targets) if targets is not None else None
        self._states: dict[str, NodeState] = {}
        for name, state in (states or {}).items():
            if state is NodeState.DONE:
                self._states[name] = state
        self.reasons: dict[str, str] = {}
        self._stop_before = frozenset(stop_before)
        self._one_step = one_step
        self._handed = 0
        self.stopped: str | None = None  #: why the run stopped early (None: it did not)
        self._seen_version = -1
        self._reach: set[str] = set()
        self._readers: dict[str, list[str]] = {}
        self._touched: list[str] = []
        self._running = 0
        self._pending_check = True
        #: The first node that failed and why (None: none failed).
        self.first_failure: tuple[str, str] | None = None

    # -- reading ----------------------------------------------------------------------------

    def state(self, name: str) -> NodeState:
        if name in self._states:
            return self._states[name]
        node = self.model.nodes.get(name)
        if node is not None and node.kind is NodeKind.VALUE:
            return NodeState.DONE
        return NodeState.WAITING

    @property
    def states(self) -> dict[str, NodeState]:
        """Every node's state, in the graph's order."""
        return {name: self.state(name) for name in self.model.nodes}

    def is_active(self) -> bool:
        """Whether the run goes on: a node runs, or one may start now."""
        if self._running:
            return True
        return bool(self._candidates_ready(peek=True))

    # -- inputs ------------------------------------------------------------------------------

    def get_ready(self) -> tuple[str, ...]:
        """The nodes that may start now; each is marked running (hand each out once)."""
        return self._candidates_ready(peek=False)

    def produced(self, name: str) -> None:
        """``name`` produced its first bytes: readers that stream it may start."""
        if self._states.get(name) is NodeState.RUNNING:
            self._states[name] = NodeState.STREAMING
            self._touched.append(name)

    def done(self, name: str) -> None:
        """``name`` finished."""
        self._end(name, NodeState.DONE)

    def failed(self, name: str, reason: str) -> None:
        """``name`` failed; nodes that read it will be skipped."""
        self._end(name, NodeState.FAILED)
        self.reasons[name] = reason
        if self.first_failure is None:
            self.first_failure = (name, reason)

    def stop(self, reason: str) -> None:
        """Start nothing more (a cancel, a step control); what waits is skipped at the end."""
        if self.stopped is None:
            self.stopped = reason

    def finish(self) -> None:
        """The run ended: every reached node that never started is marked skipped."""
        self._refresh()
        for name in self._reach:
            if self.state(name) is NodeState.WAITING:
                self._states[name] = NodeState.SKIPPED
                self.reasons.setdefault(name, self._why_not(name))

    # -- the decisions -----------------------------------------------------------------------

    def _end(self, name: str, state: NodeState) -> None:
        if self._states.get(name) in (NodeState.RUNNING, NodeState.STREAMING):
            self._running -= 1
        self._states[name] = state
        self._touched.append(name)

    def _refresh(self) -> None:
        model = self.model
        if model.version == self._seen_version:
            return
        self._seen_version = model.version
        targets = self._targets if self._targets is not None else model.sinks()
        self._reach = model.upstream(t for t in targets if t in model.nodes)
        readers: dict[str, list[str]] = {}
        for name in self._reach:
            for source in model.inputs_of(name):
                readers.setdefault(source, []).append(name)
        self._readers = readers
        self._pending_check = True

    def _candidates_ready(self, *, peek: bool) -> tuple[str, ...]:
        self._refresh()
        if self.stopped is not None:
            return ()
        if self._pending_check:
            candidates: Iterable[str] = [n for n in self.model.nodes if n in self._reach]
        else:
            candidates = {r for t in self._touched for r in self._readers.get(t, ())}
        if not peek:
            self._pending_check = False
            self._touched = []
        ready: list[str] = []
        for name in candidates:
            if self.state(name) is not NodeState.WAITING:
                continue
            verdict = self._verdict(name)
            if verdict is None:
                continue
            if verdict:
                if peek:
                    return (name,)
                self._states[name] = NodeState.SKIPPED
                self.reasons[name] = verdict
                self._touched.append(name)
                continue
            if name in self._stop_before:
                if not peek:
                    self.stop(f"stopped before {name}")
                break
            if peek:
                return (name,)
            ready.append(name)
            if self._one_step and self._handed + len(ready) >= 1:
                self.stop(f"one step: {name}")
                break
        if peek:
            return ()
        if self._touched and any(self._states.get(n) is NodeState.SKIPPED for n in self._touched):
            # A skip can skip its own readers: decide them in this same call.
            more = self._candidates_ready(peek=False) if self.stopped is None else ()
            ready.extend(n for n in more if n not in ready)
        for name in ready:
            if self._states.get(name) is not NodeState.RUNNING:
                self._states[name] = NodeState.RUNNING
                self._running += 1
                self._handed += 1
        return tuple(ready)

    def _verdict(self, name: str) -> str | None:
        """``""``: may start; a reason: must be skipped; None: not yet."""
        ok = True
        for source in self.model.inputs_of(name):
            state = self.state(source)
            if state in _BROKEN:
                return f"input {source} {state.value}"
            if state not in self._feeding:
                ok = False
        return "" if ok else None

    def _why_not(self, name: str) -> str:
        if self.stopped is not None:
            return self.stopped
        waiting = [s for s in self.model.inputs_of(name) if self.state(s) not in _FINISHED]
        return f"waiting for {', '.join(waiting)}" if waiting else "not started"
