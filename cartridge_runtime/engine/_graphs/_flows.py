"""One node's outputs during a graph run: pieces kept and broadcast to any number of readers.

A graph grows while it runs, so a reader may come after the pieces it reads were made; every
piece of a node's output is therefore kept (they are the run's result anyway) and a reader
walks them by index, waiting only when it has caught up. No piece is copied.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio

from ...protocol import AttributionClass, ErrorCode
from .._errors import CallError
from .._events import Item, OutputResult

__all__ = ("Flow", "NodeFlows")


class Flow:
    """One output of one node."""

    def __init__(self, output: str | None, media_urn: str, is_sequence: bool) -> None:
        self.output = output
        self.media_urn = media_urn
        self.is_sequence = is_sequence
        self.pieces: list[Any] = []  #: bytes for a scalar output, :class:`Item` for a sequence
        self.ended = False

    def result(self) -> OutputResult:
        if self.is_sequence:
            return OutputResult(
                output=self.output,
                media_urn=self.media_urn,
                is_sequence=True,
                items=tuple(self.pieces),
            )
        return OutputResult(
            output=self.output,
            media_urn=self.media_urn,
            is_sequence=False,
            data=b"".join(self.pieces),
        )


class NodeFlows:
    """Every output of one node, and the wake-up of its readers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.flows: dict[str | None, Flow] = {}
        self.finished = False
        self.error: CallError | None = None
        self._changed = anyio.Event()

    # -- the producer ------------------------------------------------------------------------

    def start(self, output: str | None, media_urn: str, is_sequence: bool) -> None:
        if output not in self.flows:
            self.flows[output] = Flow(output, media_urn, is_sequence)
            self._wake()

    def put(self, output: str | None, piece: Any) -> None:
        flow = self.flows.get(output)
        if flow is None:
            flow = self.flows[output] = Flow(output, "media:", isinstance(piece, Item))
        flow.pieces.append(piece)
        self._wake()

    def end(self, output: str | None) -> None:
        flow = self.flows.get(output)
        if flow is not None:
            flow.ended = True
            self._wake()

    def finish(self, error: CallError | None = None) -> None:
        self.finished = True
        self.error = error
        for flow in self.flows.values():
            flow.ended = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- readers -----------------------------------------------------------------------------

    async def wait_change(self) -> None:
        await self._changed.wait()

    async def pieces(self, output: str | None) -> AsyncIterator[Any]:
        """The pieces of ``output``, as they come; raises the node's failure.

        :raises CallError: the node failed, or finished without that output.
        """
        index = 0
        while True:
            flow = self.flows.get(output)
            if flow is not None:
                while index < len(flow.pieces):
                    yield flow.pieces[index]
                    index += 1
                if flow.ended and index >= len(flow.pieces):
                    if self.error is not None:
                        raise self.error
                    return
            elif self.finished:
                if self.error is not None:
                    raise self.error
                if output is None:
                    return  # a node without a main output gives nothing
                raise CallError(
                    ErrorCode.UNKNOWN_OUTPUT,
                    AttributionClass.INPUT,
                    f"node {self.name} has no output {output!r}",
                )
            await self.wait_change()

    def results(self) -> dict[str | None, OutputResult]:
        return {key: flow.result() for key, flow in self.flows.items()}
