"""Status you can act on: per replica the calls served, in flight, queued, resident memory,
starts and the last exit; the OpenTelemetry instruments carry the same figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import Engine

SCRIPT = Path(__file__).with_name("ops_cartridge.py")
MIB = 1 << 20


def load_ops() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ops_cartridge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OPS = load_ops()


async def until(predicate: Any, seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - engine state has no event to wait on
            await anyio.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory figures from /proc")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_each_replica_reports_calls_memory_starts_and_its_last_exit(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None, memory_interval=0.05) as engine:
            name = engine.add_cartridge(SCRIPT, name="two", replicas=2, memory_limit=512 * MIB)
            await engine.start(name)
            for _ in range(4):
                await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])
            async with anyio.create_task_group() as tg:
                tg.start_soon(engine.call_bytes, OPS.VERSION, [(OPS.TEXT, b"0.5")])
                await until(lambda: engine.status()[0].in_flight == 1)
                (status,) = engine.status()
                assert status.served == 5 and status.starts == 2
                assert sum(r.served for r in status.replicas) == 5
                assert [r.in_flight for r in status.replicas].count(1) == 1
                assert all(r.queued == 0 for r in status.replicas)
                assert all(r.resident_memory and r.resident_memory > MIB for r in status.replicas)
                assert status.resident_memory == sum(
                    r.resident_memory or 0 for r in status.replicas
                )
                assert status.memory_limit == 512 * MIB
                assert all(r.last_exit is None for r in status.replicas)
            engine.kill(name, replica=1)
            # Dead at once; how it ended is written when the watchdog is told, a moment later.
            await until(lambda: engine.status()[0].replicas[1].last_exit is not None)
            replica = engine.status()[0].replicas[1]
            assert replica.state == "dead" and "died" in replica.last_exit
            assert replica.resident_memory is None

    anyio.run(main, backend=backend)


def test_the_otel_exporter_reports_each_replica() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from cartridge_runtime.engine._otel import OtelExporter

    reader = InMemoryMetricReader()
    points: dict[str, list[tuple[Any, dict[str, Any]]]] = {}

    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            engine.add_cartridge(OPS.build_runtime(), name="inproc", memory_limit=1 << 30)
            engine.add_observer(OtelExporter(meter_provider=MeterProvider(metric_readers=[reader])))
            await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])
            await engine.call(OPS.ECHO, [(OPS.TEXT, b"y")])
            # In process there is nothing of its own to measure: the limit is not enforced.
            assert engine.status()[0].replicas[0].memory_enforcement is None
            data: Any = reader.get_metrics_data()  # the SDK's types, read loosely
            for rm in data.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        for point in metric.data.data_points:
                            points.setdefault(metric.name, []).append(
                                (point.value, dict(point.attributes))
                            )

    anyio.run(main, backend="asyncio")
    where = {"bifaci.cartridge": "inproc", "bifaci.replica": 0}
    assert points["bifaci.replica.served"] == [(2, where)]
    assert points["bifaci.replica.starts"] == [(1, where)]
    assert points["bifaci.replica.in_flight"] == [(0, where)]
    assert points["bifaci.replica.queued"] == [(0, where)]
    assert "bifaci.replica.resident_memory" not in points  # in process: no figure of its own
    assert points["bifaci.replica.state"] == [
        (1, where | {"bifaci.state": "running", "bifaci.last_exit": ""})
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory figures from /proc")
def test_every_subprocess_replica_reports_its_memory_without_a_limit() -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            name = engine.add_cartridge(SCRIPT, name="free", replicas=2)
            await engine.start(name)
            (status,) = engine.status()
            assert status.memory_limit is None
            assert all(r.resident_memory and r.resident_memory > MIB for r in status.replicas)
            assert status.resident_memory == sum(r.resident_memory or 0 for r in status.replicas)

    anyio.run(main, backend="asyncio")
