"""What a graph run gives back: each node's outputs, state and error."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ...graph import NodeState
from .._errors import CallError
from .._events import OutputResult

__all__ = ("NodeResult", "GraphResult")


@attrs.frozen(kw_only=True)
class NodeResult:
    """One node after a run: its outputs (keyed as :class:`Result` keys them: ``None`` for
    the main output), its state, and its failure or the reason it was skipped."""

    name: str
    state: NodeState
    outputs: Mapping[str | None, OutputResult] = attrs.field(factory=dict)
    error: CallError | None = None
    reason: str | None = None

    @property
    def data(self) -> bytes:
        """The main output's bytes (``b""`` when there is none)."""
        main = self.outputs.get(None)
        return main.data if main is not None else b""

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@attrs.frozen(kw_only=True)
class GraphResult:
    """A finished (or stopped) run: every node, the first failure, and why it stopped early."""

    nodes: Mapping[str, NodeResult]
    error: CallError | None = None  #: the first node that failed (None: none did)
    failed_node: str | None = None
    stopped: str | None = None  #: a step control or a cancel that ended the run early
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def __getitem__(self, name: str) -> NodeResult:
        return self.nodes[name]

    def raise_for_error(self) -> None:
        """:raises CallError: the first failure of the run."""
        if self.error is not None:
            raise self.error
