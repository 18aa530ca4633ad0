"""The cartridge runtime: write a cartridge as one Python file.

::

    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

    class Echo(Op):
        async def perform(self, dry: DryContext, wet: WetContext) -> None:
            req = wet.request
            out = req.output()
            async for stream in req.take_input():
                async for chunk in stream:          # bytes, incrementally, credit-paced
                    await out.write(chunk)

    runtime = CartridgeRuntime(Manifest.build(name="demo", version="1.0.0", description="demo",
                                              caps=[CapDef.simple(ECHO, "Echo", aliases="echo")]))
    runtime.register_op(ECHO, Echo)
    if __name__ == "__main__":
        runtime.run()        # no argv: CBOR frames on stdio; any argv: CLI mode

Embedding and tests: ``await runtime.serve(receive, send)`` over any anyio byte streams returns
the exit status (0 EOF, 1 handshake failure or relay frame, 65 corrupt byte stream, 137 forced
cancel). :mod:`cartridge_runtime.testing` drives it in-process.

Handler API: :class:`Op` (``async def perform(dry, wet)``, or a plain ``def`` that runs in a
worker thread with blocking proxies), :class:`DryContext`, :class:`WetContext` (``wet.request``),
:class:`Request` (``take_input()``, ``output()``, ``output_for(urn)``, ``peer()``, ``network``),
:class:`InputPackage` / :class:`InputStream`, :class:`OutputStream`, peer calls
(:class:`PeerInvoker`, :class:`PeerCall`, :class:`PeerResponse`), and errors
(:class:`OpError` chooses the ERR code/class/arg_urn exactly).

CLI-mode hook (used by ``_cli_mode.run_cli``)
---------------------------------------------
``runtime.find_cap_def(alias_or_urn) -> CapDef | None`` and
``await runtime._invoke_local(cap_urn, inputs, sink)`` run one handler in-process on whole
inputs ``[(media_urn, bytes), ...]`` under the ``full`` network policy. ``sink`` is any object
with some of these methods (sync or async; a missing one means "ignore"); ``output`` is the
:class:`OutputSpec` (``.is_main``, ``.media_urn``, ``.declared_urn``, ``.name``):

* ``start(output, is_sequence, unbounded, meta)`` — the output opened
* ``write(output, data: bytes)`` — raw bytes from ``OutputStream.write``
* ``value(output, value)`` — one value from ``emit_cbor`` (bytes, str, int, list, ...)
* ``item(output, value, meta)`` — one sequence item from ``emit_list_item``
* ``close(output)`` — the output ended
* ``progress(fraction, message)`` (``fraction`` ``None``: indeterminate),
  ``log(level, message, attribution_class, arg_urn)``
* ``finish(progress, message)`` — the handler succeeded (END's values)

A failure raises :class:`CartridgeError` (``.code``, ``.attribution_class``, ``.message``,
``.arg_urn``): an :class:`OpError` as raised, ``NO_HANDLER`` for an unknown cap, anything else as
``HANDLER_ERROR``.

The public names are resolved on first use (a module ``__getattr__`` over the table of their
home submodules): a cartridge pays for what it uses, and the ``cartridge`` command, which needs
only CLI mode's argument mapping, does not build the handler API's classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives: the submodule imported the first time the name is read.
_HOMES: dict[str, tuple[str, ...]] = {
    "_blocking": (
        "BlockingGraphBatch",
        "BlockingGraphGrowth",
        "BlockingInputPackage",
        "BlockingInputStream",
        "BlockingOutputStream",
        "BlockingPeerCall",
        "BlockingPeerInvoker",
        "BlockingPeerResponse",
        "BlockingRequest",
        "BlockingWetContext",
    ),
    "_cartridge_context": ("CartridgeContext",),
    "_context": (
        "REQUEST_KEY",
        "DryContext",
        "FunctionOp",
        "Key",
        "Op",
        "OpMetadata",
        "SyncFunctionOp",
        "WetContext",
    ),
    "_errors": (
        "CartridgeError",
        "InputConsumedError",
        "InputDecodeError",
        "InputStreamError",
        "MissingInput",
        "NetworkPolicyError",
        "OpError",
        "OutputError",
        "PeerCallError",
        "RequestCancelled",
        "SetupError",
        "UnknownArgument",
        "UnknownOutput",
    ),
    "_frames._exit": (
        "EXIT_FAILURE",
        "EXIT_FORCE_KILLED",
        "EXIT_OK",
        "EXIT_PROTOCOL",
        "ExitStatus",
    ),
    "_graph": (
        "GraphBatch",
        "GraphGrowth",
        "GraphGrowthError",
    ),
    "_input": (
        "InputItem",
        "InputStream",
    ),
    "_input_package": ("InputPackage",),
    "_network": (
        "NetworkAccess",
        "Reach",
    ),
    "_output": (
        "OutputSpec",
        "OutputStream",
    ),
    "_peer": (
        "PeerCall",
        "PeerData",
        "PeerInvoker",
        "PeerLog",
        "PeerResponse",
    ),
    "_request": ("Request",),
    "_runtime": ("CartridgeRuntime",),
}

__all__ = (
    "CartridgeRuntime",
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_PROTOCOL",
    "EXIT_FORCE_KILLED",
    "ExitStatus",
    # handler API
    "Op",
    "OpMetadata",
    "FunctionOp",
    "SyncFunctionOp",
    "DryContext",
    "WetContext",
    "CartridgeContext",
    "Key",
    "REQUEST_KEY",
    "Reach",
    "NetworkAccess",
    "Request",
    "InputPackage",
    "InputStream",
    "InputItem",
    "OutputStream",
    "OutputSpec",
    "PeerInvoker",
    "PeerCall",
    "PeerResponse",
    "PeerData",
    "PeerLog",
    # what a synchronous handler sees (blocking proxies, for type checkers)
    "BlockingWetContext",
    "BlockingRequest",
    "BlockingInputPackage",
    "BlockingInputStream",
    "BlockingOutputStream",
    "BlockingPeerInvoker",
    "BlockingPeerCall",
    "BlockingPeerResponse",
    "BlockingGraphBatch",
    "BlockingGraphGrowth",
    # errors
    "CartridgeError",
    "OpError",
    "InputConsumedError",
    "UnknownArgument",
    "UnknownOutput",
    "MissingInput",
    "InputDecodeError",
    "InputStreamError",
    "OutputError",
    "NetworkPolicyError",
    "RequestCancelled",
    "PeerCallError",
    "GraphBatch",
    "GraphGrowth",
    "GraphGrowthError",
    "SetupError",
)


_EXPORTS: dict[str, str] = {name: home for home, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only; names in __all__ re-export
    from ._blocking import (
        BlockingGraphBatch,
        BlockingGraphGrowth,
        BlockingInputPackage,
        BlockingInputStream,
        BlockingOutputStream,
        BlockingPeerCall,
        BlockingPeerInvoker,
        BlockingPeerResponse,
        BlockingRequest,
        BlockingWetContext,
    )
    from ._cartridge_context import CartridgeContext
    from ._context import (
        REQUEST_KEY,
        DryContext,
        FunctionOp,
        Key,
        Op,
        OpMetadata,
        SyncFunctionOp,
        WetContext,
    )
    from ._errors import (
        CartridgeError,
        InputConsumedError,
        InputDecodeError,
        InputStreamError,
        MissingInput,
        NetworkPolicyError,
        OpError,
        OutputError,
        PeerCallError,
        RequestCancelled,
        SetupError,
        UnknownArgument,
        UnknownOutput,
    )
    from ._frames._exit import EXIT_FAILURE, EXIT_FORCE_KILLED, EXIT_OK, EXIT_PROTOCOL, ExitStatus
    from ._graph import GraphBatch, GraphGrowth, GraphGrowthError
    from ._input import InputItem, InputStream
    from ._input_package import InputPackage
    from ._network import NetworkAccess, Reach
    from ._output import OutputSpec, OutputStream
    from ._peer import PeerCall, PeerData, PeerInvoker, PeerLog, PeerResponse
    from ._request import Request
    from ._runtime import CartridgeRuntime
