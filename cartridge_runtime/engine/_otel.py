"""OpenTelemetry export of calls and machine runs (the optional extra ``otel``).

:class:`OtelExporter` is a :class:`~cartridge_runtime.engine.CallObserver`: register it with
``engine.add_observer(OtelExporter())``. It records

* one span per call, ``bifaci.call <cap>``, with the attributes ``bifaci.cap``,
  ``bifaci.handler_cap``, ``bifaci.cartridge``, ``bifaci.bytes_in``, ``bifaci.bytes_out`` and
  ``bifaci.outcome`` (``ok`` or the error code; an error also sets the span's status);
* a span per machine run, ``bifaci.machine``, with a child span per step call,
  ``bifaci.step <alias>`` (``bifaci.step``, ``bifaci.item``, ``bifaci.outcome``); the call
  that a step makes is a child of its step's span;
* each handler trace event (``req.trace``) as an event on its call's span;
* each handler metric (``req.metric``) on an OTel counter of the same name (``bifaci.`` in
  front), with the labels and ``bifaci.cartridge`` as attributes.

It needs only ``opentelemetry-api``: spans and instruments go to the tracer and meter providers
given, or the global ones.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any

try:
    import opentelemetry.metrics as otel_metrics
    import opentelemetry.trace as otel_trace
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "OtelExporter needs OpenTelemetry: pip install 'cartridge-runtime[otel]'"
    ) from exc

from ._events import Metric, TraceEvent
from ._machines._events import MachineRunError, StepFinished, StepStarted
from ._machines._report import Reports
from ._observe import CallInfo, CallOutcome

__all__ = ("OtelExporter",)

_SCOPE = "cartridge_runtime.engine"

#: The span of the machine step the current task runs, so its call nests under it.
_STEP_SPAN: contextvars.ContextVar[Any] = contextvars.ContextVar("bifaci_step_span", default=None)


class OtelExporter:
    """Spans and metric instruments for every call and machine run of an engine."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self._tracer = otel_trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self._meter = otel_metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self._counters: dict[str, Any] = {}
        #: Per machine run: its span and the open span of each (step, item).
        self._runs: dict[int, tuple[Any, dict[tuple[str, int | None], tuple[Any, Any]]]] = {}

    def __repr__(self) -> str:
        return f"OtelExporter(instruments={sorted(self._counters)!r})"

    # -- calls -----------------------------------------------------------------------------

    def call_started(self, call: CallInfo) -> Any:
        parent = _STEP_SPAN.get()
        context = otel_trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(
            f"bifaci.call {call.cap}",
            context=context,
            kind=otel_trace.SpanKind.CLIENT,
            attributes={
                "bifaci.cap": call.cap,
                "bifaci.handler_cap": call.handler_cap,
                "bifaci.cartridge": call.cartridge,
                "bifaci.bytes_in": call.bytes_in,
            },
        )
        return (span, call.cartridge)

    def call_event(self, token: Any, event: Metric | TraceEvent) -> None:
        span, cartridge = token
        if isinstance(event, TraceEvent):
            span.add_event(event.name, attributes=dict(event.attributes))
            return
        counter = self._counters.get(event.name)
        if counter is None:
            counter = self._counters[event.name] = self._meter.create_counter(
                f"bifaci.{event.name}", description="reported by cartridge handlers (req.metric)"
            )
        attributes = {**event.labels, "bifaci.cartridge": cartridge}
        if event.value >= 0:
            counter.add(event.value, attributes=attributes)
        else:  # a counter only grows: a negative report goes on an up-down counter
            self._updown(event.name).add(event.value, attributes=attributes)

    def _updown(self, name: str) -> Any:
        key = name + "\0updown"
        inst = self._counters.get(key)
        if inst is None:
            inst = self._counters[key] = self._meter.create_up_down_counter(
                f"bifaci.{name}.delta", description="negative reports of a handler metric"
            )
        return inst

    def call_finished(self, token: Any, outcome: CallOutcome) -> None:
        span, _ = token
        span.set_attribute("bifaci.bytes_out", outcome.bytes_out)
        span.set_attribute("bifaci.outcome", "ok" if outcome.ok else str(outcome.code))
        if not outcome.ok:
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(outcome.code)))
        span.end()

    # -- machine runs ------------------------------------------------------------------------

    def machine_event(self, run: Any, event: Any) -> None:
        key = id(run)
        if event is None:
            span = self._tracer.start_span("bifaci.machine", context=_current_context())
            self._runs[key] = (span, {})
            return
        entry = self._runs.get(key)
        if entry is None:
            return
        run_span, steps = entry
        if isinstance(event, StepStarted):
            context = otel_trace.set_span_in_context(run_span)
            span = self._tracer.start_span(
                f"bifaci.step {event.step}",
                context=context,
                attributes={"bifaci.step": event.step, "bifaci.cap": event.cap}
                | ({"bifaci.item": event.item} if event.item is not None else {}),
            )
            earlier = steps.get((event.step, event.item))
            if earlier is not None:  # a retried attempt: the previous one ends here
                earlier[0].set_attribute("bifaci.outcome", "retried")
                earlier[0].end()
            steps[(event.step, event.item)] = (span, _STEP_SPAN.set(span))
        elif isinstance(event, StepFinished):
            found = steps.pop((event.step, event.item), None)
            if found is not None:
                span, reset = found
                span.set_attribute("bifaci.outcome", event.outcome)
                span.end()
                with contextlib.suppress(ValueError):  # a token of another task's context
                    _STEP_SPAN.reset(reset)
        elif isinstance(event, BaseException):  # the run failed
            for span, _ in steps.values():
                span.set_attribute("bifaci.outcome", "failed")
            where = event.step if isinstance(event, MachineRunError) else type(event).__name__
            run_span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, where))
            self._close(key)
        elif isinstance(event, Reports):  # the run ended
            self._close(key)

    def _close(self, key: int) -> None:
        run_span, steps = self._runs.pop(key)
        for span, _ in steps.values():
            span.end()
        run_span.end()


def _current_context() -> Any:
    parent = _STEP_SPAN.get()
    return otel_trace.set_span_in_context(parent) if parent is not None else None
