"""OpenTelemetry spans count streamed inputs in ``bifaci.bytes_in`` (an async iterable, a
machine's first step) and keep span names low-cardinality (the alias; the URN an attribute)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.engine import CallInfo, Engine, InProcess

pytest.importorskip("opentelemetry.sdk")


def _exporter() -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cartridge_runtime.engine import OtelExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return spans, OtelExporter(provider)


async def _pieces() -> AsyncIterator[bytes]:
    for _ in range(5):
        yield b"x" * 1000


def _calls(spans: Any) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.name.startswith("bifaci.call")]


@pytest.mark.asyncio
async def test_streamed_inputs_count_in_bytes_in_and_the_span_is_named_by_alias() -> None:
    spans, exporter = _exporter()
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        engine.add_observer(exporter)
        result = await engine.call(ECHO, [("media:", _pieces())])
        assert len(result.data) == 5000
        await engine.call(ECHO, [("media:", b"abc")])
    streamed, known = _calls(spans)
    assert streamed.attributes["bifaci.bytes_in"] == 5000
    assert known.attributes["bifaci.bytes_in"] == 3
    assert streamed.name == "bifaci.call echo"
    assert streamed.attributes["bifaci.cap"] == ECHO


@pytest.mark.asyncio
async def test_a_machines_first_step_counts_its_input() -> None:
    spans, exporter = _exporter()
    doc = b"y" * 3000
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        engine.add_observer(exporter)
        result = await engine.run_machine(f"e1 {ECHO}\ne2 {ECHO}\ndoc -> e1 -> a\na -> e2 -> out",
                                          {"doc": doc})  # fmt: skip
        assert result.outputs["out"].data == doc
    calls = _calls(spans)
    assert len(calls) == 2
    assert [c.attributes["bifaci.bytes_in"] for c in calls] == [3000, 3000]


def test_without_an_alias_the_span_takes_the_op_tag() -> None:
    from cartridge_runtime.engine._otel import _short_name

    info = CallInfo(cap="cap:op=x;in=media:", handler_cap=ECHO, cartridge="rt", bytes_in=0)
    assert _short_name(info) == "echo"
    bare = CallInfo(cap="cap:", handler_cap="cap:", cartridge="rt", bytes_in=0)
    assert _short_name(bare) == "rt"
