"""The :class:`Request` a handler serves: its input, its outputs, peer calls and policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cartridge_runtime.protocol import (
    METRIC_LEVEL,
    TRACE_LEVEL,
    AttributionClass,
    metric_data,
    trace_data,
)
from cartridge_runtime.urn import media_matches_for_stream

from ._errors import InputConsumedError, UnknownOutput
from ._input_package import InputPackage, bind_definition
from ._network import NetworkAccess
from ._output import OutputStream, Reporter
from ._reports import report_final, report_log, report_progress

if TYPE_CHECKING:
    from ._graph import GraphGrowth
    from ._peer import PeerInvoker


class Request:
    """One call of a cap, as its handler sees it.

    :ivar cap_urn: the cap URN the requester named.
    :ivar network: the live network policy (:meth:`NetworkAccess.allow`).
    """

    def __init__(
        self,
        *,
        cap_urn: str,
        input_package: InputPackage,
        outputs: Sequence[OutputStream],
        reporter: Reporter,
        network: NetworkAccess,
        peer: PeerInvoker | None = None,
        peer_factory: Callable[[], PeerInvoker] | None = None,
        definition: Any = None,
        message_id: Any = None,
    ) -> None:
        self.cap_urn = cap_urn
        bind_definition(input_package, cap_urn, definition)
        self._input: InputPackage | None = input_package
        self._outputs = list(outputs)
        self._reporter = reporter
        self.network = network
        self._peer = peer
        #: Makes :attr:`_peer` at the first :meth:`peer` (most handlers never call a peer).
        self._peer_factory = peer_factory
        self._message_id = message_id

    def __repr__(self) -> str:
        return f"Request(cap_urn={self.cap_urn!r}, outputs={[o.spec.declared_urn for o in self._outputs]!r})"

    def take_input(self) -> InputPackage:
        """The request's input streams. Only once per request.

        :raises InputConsumedError: called a second time.
        """
        if self._input is None:
            raise InputConsumedError(
                "take_input() was already called for this request; the input can be taken once"
            )
        package, self._input = self._input, None
        return package

    def output(self) -> OutputStream:
        """The main output."""
        return self._outputs[0]

    @property
    def outputs(self) -> list[OutputStream]:
        """Every output: the main one first, then the others in definition order."""
        return list(self._outputs)

    def output_for(self, media_urn_or_name: str) -> OutputStream:
        """The output whose declared media URN is equivalent to ``media_urn_or_name``, or,
        for text that is not a ``media:`` URN, the output of that *name* in the cap's
        definition (``output_for("dropped")``).

        :raises UnknownOutput: the cap declares no such output.
        """
        key = media_urn_or_name
        if key.startswith("media:"):
            for out in self._outputs:
                if media_matches_for_stream(out.spec.declared_urn, key):
                    return out
        else:
            for out in self._outputs:
                if out.spec.name == key:
                    return out
        raise UnknownOutput(
            self.cap_urn,
            key,
            [f"{o.spec.name} ({o.spec.declared_urn})" for o in self._outputs],
        )

    def peer(self) -> PeerInvoker:
        """Call other caps through the host (peer invocation).

        :raises RuntimeError: this runtime mode cannot make peer calls.
        """
        peer = self._peer
        if peer is None:
            if self._peer_factory is None:
                raise RuntimeError("peer calls are not available here")
            peer = self._peer = self._peer_factory()
            self._peer_factory = None
        return peer

    @property
    def graph(self) -> GraphGrowth:
        """Grow the graph this call runs in: ``await req.graph.add_value_node(...)``, the four
        operations, or ``req.graph.batch()`` for several in one call (see ``docs/graphs.md``).

        :raises RuntimeError: this runtime mode cannot make peer calls.
        """
        from ._graph import GraphGrowth

        return GraphGrowth(self.peer(), self._message_id)

    async def progress(self, fraction: float | None, message: str = "") -> None:
        """Report progress (0..1); ``None`` means indeterminate (work goes on, how far is
        unknown: a spinner, not 0%). Never waits for credit."""
        await report_progress(self._reporter, fraction, message)

    async def log(
        self,
        level: str,
        message: str,
        attribution_class: str = AttributionClass.INTERNAL,
        arg_urn: str | None = None,
    ) -> None:
        """Send a LOG frame; never waits for credit.

        :raises OutputError: ``level`` is ``progress`` (use :meth:`progress`).
        """
        await report_log(self._reporter, level, message, attribution_class, arg_urn)

    async def metric(self, name: str, value: float, **labels: Any) -> None:
        """Report a metric (a count, a duration, a size) for this call: a LOG of level
        ``metric`` (REQ-39) that the engine gathers per call and sums per cartridge. Never
        waits for credit; costs nothing when not called.

        :raises TelemetryError: a bad name, a value that is not a finite number, bad labels.
        """
        data = metric_data(name, value, labels)
        await self._reporter.telemetry(METRIC_LEVEL, f"{name}={value}", data)

    async def trace(self, name: str, **attributes: Any) -> None:
        """Record a trace event of this call (becomes an event on the engine's span of the
        call): a LOG of level ``trace`` (REQ-39). Attributes are text, int, float or bool.

        :raises TelemetryError: a bad name or attribute.
        """
        data = trace_data(name, attributes)
        await self._reporter.telemetry(TRACE_LEVEL, name, data)

    def finish(self, progress: float = 1.0, message: str | None = None) -> None:
        """Set the progress and message of the final END."""
        report_final(self._reporter, progress, message)
