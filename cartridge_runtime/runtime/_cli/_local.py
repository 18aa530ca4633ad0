"""Run one handler in-process, without frames (CLI mode's engine room).

:func:`invoke_local` (whole byte inputs) and :func:`invoke_package` (a ready, possibly still
streaming input package) build the same :class:`Request` a wire request gets, but its outputs hand
every emission to a *sink* object; see the package docstring for the sink methods.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import anyio

from cartridge_runtime.protocol import AttributionClass, ErrorCode

from .._errors import CartridgeError, handler_error_message
from .._input_package import InputPackage, package_from_bytes
from .._network import NetworkAccess
from .._output import OutputStream, finish_output
from .._request import Request
from .._specs import output_specs
from .._sync import run_perform


async def _call(sink: Any, name: str, *args: Any) -> None:
    method = getattr(sink, name, None)
    if method is None:
        return
    result = method(*args)
    if inspect.isawaitable(result):
        await result


class _SinkBackend:
    def __init__(self, sink: Any, out: Any) -> None:
        self.sink = sink
        self.out = out  # the OutputSpec

    async def start(
        self, is_sequence: bool, unbounded: bool, meta: Mapping[str, Any] | None
    ) -> None:
        await _call(self.sink, "start", self.out, is_sequence, unbounded, meta)

    async def write(self, data: bytes | memoryview) -> None:
        await _call(self.sink, "write", self.out, bytes(data))

    async def start_write(self, data: bytes | memoryview) -> None:
        await self.start(False, False, None)
        await self.write(data)

    async def emit_value(self, value: Any) -> None:
        if isinstance(value, bytes) and getattr(self.sink, "value", None) is None:
            await _call(self.sink, "write", self.out, value)  # a sink that takes only bytes
            return
        await _call(self.sink, "value", self.out, value)

    async def emit_item(self, value: Any, meta: Mapping[str, Any] | None) -> None:
        await _call(self.sink, "item", self.out, value, meta)

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        await _call(self.sink, "close", self.out)


class _SinkReporter:
    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.final: tuple[float, str | None] = (1.0, None)

    async def progress(self, fraction: float | None, message: str) -> None:
        await _call(self.sink, "progress", fraction, message)

    async def log(
        self, level: str, message: str, attribution_class: str, arg_urn: str | None
    ) -> None:
        await _call(self.sink, "log", level, message, attribution_class, arg_urn)

    async def telemetry(self, level: str, message: str, data: Any) -> None:
        await _call(self.sink, "telemetry", level, message, data)

    def finish(self, progress: float, message: str | None) -> None:
        self.final = (progress, message)


async def invoke_local(
    runtime: Any, cap_urn: str, inputs: list[tuple[str, bytes]], sink: Any
) -> None:
    """Run the handler for ``cap_urn`` on whole ``inputs``; emissions go to ``sink``.

    :raises CartridgeError: no handler (``NO_HANDLER``), or the handler failed: an
        :class:`OpError` as raised, anything else as ``HANDLER_ERROR`` with its message.
    """
    await invoke_package(runtime, cap_urn, package_from_bytes(inputs), sink)


async def invoke_package(
    runtime: Any,
    cap_urn: str,
    package: InputPackage,
    sink: Any,
    *,
    reraise: tuple[type[BaseException], ...] = (),
) -> None:
    """Run the handler for ``cap_urn`` on a ready ``package`` (its inputs may still be
    streaming in); emissions go to ``sink``.

    :param reraise: exception types the handler may raise that pass through unwrapped
        (besides :class:`CartridgeError` and cancellation).
    :raises CartridgeError: no handler (``NO_HANDLER``), or the handler failed: an
        :class:`OpError` as raised, anything else as ``HANDLER_ERROR`` with its message.
    """
    found = runtime.find_handler(cap_urn)
    if found is None:
        raise CartridgeError(
            f"No handler registered for cap: {cap_urn}",
            code=ErrorCode.NO_HANDLER,
            attribution_class=AttributionClass.ENVIRONMENT,
        )
    handler_urn, factory = found
    reporter = _SinkReporter(sink)
    specs = output_specs(runtime, cap_urn, handler_urn)
    outputs = [OutputStream(spec, _SinkBackend(sink, spec), reporter) for spec in specs]
    req = Request(
        cap_urn=cap_urn,
        input_package=package,
        outputs=outputs,
        reporter=reporter,
        network=NetworkAccess(lambda: "full"),
        definition=runtime.cap_def_for(cap_urn, handler_urn),
    )
    dry = runtime.context.dry(
        cap_urn=cap_urn, handler_urn=handler_urn, limits=runtime.limits, policy="full"
    )
    wet = runtime.context.wet(req)
    passthrough: tuple[type[BaseException], ...] = (
        CartridgeError,
        anyio.get_cancelled_exc_class(),
        *reraise,
    )
    # The cartridge context's start-up and shutdown hooks run around the call (CLI mode is one
    # call per process); inside a serving runtime they already ran and do not run again.
    async with runtime.context.lifespan():
        try:
            await run_perform(factory(), dry, wet, lambda: False)
        except passthrough:
            raise
        except Exception as exc:
            raise CartridgeError(handler_error_message(exc)) from exc
        for out in outputs:
            await finish_output(out)
    await _call(sink, "finish", *reporter.final)
