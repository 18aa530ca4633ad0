"""Metrics and traces (REQ-39): ``req.metric`` / ``req.trace`` in LOG frames
within what the reference passes through, gathered per call by the engine (on ``Result`` and
as events), summed per cartridge in ``status()``, and exported to OpenTelemetry."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import CallInfo, CallOutcome, Engine, Metric, TraceEvent
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import (
    TelemetryError,
    metric_data,
    read_metric,
    read_trace,
    trace_data,
)
from cartridge_runtime.runtime import BlockingRequest, CartridgeRuntime, Request
from cartridge_runtime.testing import CartridgeHarness

TEXT = "media:enc=utf-8"
COUNT = 'cap:in="media:enc=utf-8";op=count;out="media:enc=utf-8"'
COUNT_SYNC = 'cap:in="media:enc=utf-8";op=count-sync;out="media:enc=utf-8"'

_CARTRIDGE = textwrap.dedent(
    f"""
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, Request

    COUNT = {COUNT!r}
    runtime = CartridgeRuntime(Manifest.build(
        name="counter", version="1.0.0", description="counts",
        caps=[CapDef.simple(COUNT, "Count", aliases="count")],
    ))

    @runtime.op(COUNT)
    async def count(req: Request) -> None:
        text = await req.take_input().require_stream_str("media:enc=utf-8")
        await req.trace("split", words=len(text.split()), lang="en")
        await req.metric("words", len(text.split()), unit="word")
        await req.metric("calls", 1)
        await req.output().emit_text(str(len(text.split())))

    if __name__ == "__main__":
        runtime.run()
    """
)


def _runtime() -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="counter",
            version="1.0.0",
            description="counts",
            caps=[
                CapDef.simple(COUNT, "Count", aliases="count"),
                CapDef.simple(COUNT_SYNC, "Count sync", aliases="count-sync"),
            ],
        )
    )

    @runtime.op(COUNT)
    async def count(req: Request) -> None:
        await req.trace("split", words=2, exact=True)
        await req.metric("words", 2, unit="word")
        with pytest.raises(TelemetryError):
            await req.metric("words", float("nan"))
        with pytest.raises(TelemetryError):
            await req.trace("x", value=[1, 2])
        await req.output().emit_text("2")

    @runtime.op(COUNT_SYNC)
    def count_sync(req: BlockingRequest) -> None:
        req.metric("seconds", 0.5)
        req.trace("done")
        req.output().emit_text("ok")

    return runtime


# --- the sans-IO pieces ------------------------------------------------------------------
def test_metric_and_trace_data_round_trip_and_refuse_bad_input() -> None:
    data = metric_data("rows", 3, {"table": "t", "shard": 2})
    assert read_metric(data) == ("rows", 3, {"table": "t", "shard": "2"})
    assert read_trace(trace_data("parse", {"ok": True, "n": 1})) == ("parse", {"ok": True, "n": 1})
    for bad in [("", 1), ("x" * 201, 1), ("n", True), ("n", "1"), ("n", float("inf"))]:
        with pytest.raises(TelemetryError) as info:
            metric_data(bad[0], bad[1], {})  # type: ignore[arg-type]
        assert "hunter" not in str(info.value)
    with pytest.raises(TelemetryError):
        metric_data("n", 1, {str(i): "v" for i in range(65)})
    with pytest.raises(TelemetryError) as info:
        trace_data("t", {"secret": object()})
    assert "secret" in str(info.value)
    for junk in (
        None,
        [],
        {"name": 1},
        {"name": "n", "value": "x"},
        {"name": "n", "value": 1, "labels": {"a": 1}},
    ):
        assert read_metric(junk) is None
    assert read_trace({"name": "t", "attributes": {"a": [1]}}) is None


# --- on the wire ----------------------------------------------------------------------------
def test_a_metric_and_a_trace_are_attributed_logs_with_their_data() -> None:
    async def main() -> None:
        async with CartridgeHarness(_runtime()) as h:
            result = await h.call(COUNT, [(TEXT, b"a b")])
            assert result.ok, result.error
            logs = [f for f in result.frames if f.frame_type.name == "LOG"]
            metas = [dict(f.meta or {}) for f in logs]
            trace, metric = metas
            # REQ-33: level, attribution_class, a non-empty message: what the reference reads
            assert trace["level"] == "trace" and trace["attribution_class"] == "internal"
            assert trace["message"] == "split"
            assert trace["trace"] == {"name": "split", "attributes": {"words": 2, "exact": True}}
            assert metric["level"] == "metric" and metric["message"] == "words=2"
            assert metric["metric"] == {"name": "words", "value": 2, "labels": {"unit": "word"}}
            sync = await h.call(COUNT_SYNC, [(TEXT, b"")])
            assert sync.ok and [log.level for log in sync.logs] == ["metric", "trace"]

    anyio.run(main)


# --- the engine ---------------------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def call_started(self, call: CallInfo) -> Any:
        self.seen.append(call)
        return len(self.seen)

    def call_event(self, token: Any, event: Metric | TraceEvent) -> None:
        self.seen.append((token, event))

    def call_finished(self, token: Any, outcome: CallOutcome) -> None:
        self.seen.append((token, outcome))

    def machine_event(self, run: Any, event: Any) -> None:
        pass


@pytest.mark.asyncio
async def test_the_engine_gathers_metrics_per_call_and_sums_them_per_cartridge(
    tmp_path: Path,
) -> None:
    script = tmp_path / "counter.py"
    script.write_text(_CARTRIDGE)
    recorder = _Recorder()
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], name="counter")
        first = await engine.call(COUNT, [(TEXT, "one two three")], timeout=60)
        assert first.data == b"3" and first.logs == ()
        assert first.metrics == (
            Metric(name="words", value=3, labels={"unit": "word"}),
            Metric(name="calls", value=1, labels={}),
        )
        assert first.traces == (TraceEvent(name="split", attributes={"words": 3, "lang": "en"}),)
        engine.add_observer(recorder)
        async with engine.call(COUNT, [(TEXT, "four five")], timeout=60) as response:
            events = [ev async for ev in response]
        assert [type(ev).__name__ for ev in events if isinstance(ev, Metric | TraceEvent)] == [
            "TraceEvent",
            "Metric",
            "Metric",
        ]
        (status,) = engine.status()
        assert status.metrics == {"words": 5, "calls": 2}
    call, *middle, (token, outcome) = recorder.seen
    assert isinstance(call, CallInfo) and call.cartridge == "counter" and call.bytes_in == 9
    assert [ev for _, ev in middle][1] == Metric(name="words", value=2, labels={"unit": "word"})
    assert outcome.ok and outcome.code is None and outcome.bytes_out > 0 and token == 1


# --- OpenTelemetry ------------------------------------------------------------------------------
def _otel() -> tuple[Any, Any, Any, Any]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    return spans, tracer_provider, reader, meter_provider


def _metric_points(reader: Any) -> dict[str, list[tuple[float, dict[str, Any]]]]:
    out: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    out.setdefault(metric.name, []).append((point.value, dict(point.attributes)))
    return out


@pytest.mark.asyncio
async def test_otel_exports_a_span_per_call_with_trace_events_and_metric_instruments(
    tmp_path: Path,
) -> None:
    spans, tracer_provider, reader, meter_provider = _otel()
    from cartridge_runtime.engine import OtelExporter

    script = tmp_path / "counter.py"
    script.write_text(_CARTRIDGE)
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], name="counter")
        engine.add_observer(OtelExporter(tracer_provider, meter_provider))
        await engine.call(COUNT, [(TEXT, "a b c")], timeout=60)
        await engine.call(COUNT, [(TEXT, "d")], timeout=60)
        with pytest.raises(Exception):  # noqa: B017 - any refusal: no route
            await engine.call("cap:op=nobody-has-it", [], timeout=60)
    finished = spans.get_finished_spans()
    assert len(finished) == 2  # a call that was never routed has no span
    span = finished[0]
    assert span.name == f"bifaci.call {COUNT}"
    attrs = dict(span.attributes)
    assert attrs["bifaci.cap"] == COUNT and attrs["bifaci.cartridge"] == "counter"
    assert attrs["bifaci.bytes_in"] == 5 and attrs["bifaci.bytes_out"] > 0
    assert attrs["bifaci.outcome"] == "ok"
    assert [(e.name, dict(e.attributes)) for e in span.events] == [
        ("split", {"words": 3, "lang": "en"})
    ]
    points = _metric_points(reader)
    assert points["bifaci.words"] == [(4, {"unit": "word", "bifaci.cartridge": "counter"})]
    assert points["bifaci.calls"] == [(2, {"bifaci.cartridge": "counter"})]


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.asyncio
async def test_otel_gives_a_machine_run_child_spans_per_step() -> None:
    spans, tracer_provider, _, meter_provider = _otel()
    from cartridge_runtime.engine import OtelExporter

    async with Engine() as engine:
        engine.add_cartridge(ROOT / "cartridges" / "wordkit.py")
        engine.add_observer(OtelExporter(tracer_provider, meter_provider))
        result = await engine.run_machine(
            ROOT / "cartridges" / "samples" / "machines" / "shout.machine", {"doc": "a b"}
        )
        assert result["shouted"].data
    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name == "bifaci.machine"]
    steps = [s for s in finished if s.name.startswith("bifaci.step ")]
    calls = [s for s in finished if s.name.startswith("bifaci.call ")]
    assert {s.attributes["bifaci.step"] for s in steps} == {"split", "upper", "join"}
    assert len([s for s in steps if s.attributes["bifaci.step"] == "upper"]) == 2  # per word
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in steps)
    assert all(s.attributes["bifaci.outcome"] == "ok" for s in steps)
    step_ids = {s.context.span_id for s in steps}
    assert len(calls) == len(steps)
    assert all(c.parent is not None and c.parent.span_id in step_ids for c in calls)
