"""The engine: launch cartridges of any language as subprocesses (or serve a runtime in this
process), route calls to them by cap URN, stream data both ways under credit flow control,
watch their health and survive their crashes; run several replicas of a cartridge.

Example::

    async with Engine() as engine:
        engine.add_cartridge("cartridges/interop.py")
        async with engine.call("cap:in=media:;op=echo;out=media:", [("media:", b"hi")]) as response:
            async for event in response:
                ...
        result = await engine.call(cap, [("media:", b"hi")], timeout=30)  # the whole Result

    engine.add_cartridge("cpu.py", replicas=2)  # two processes; calls go to the least loaded
    engine.add_cartridge("embedded", placement=InProcess(runtime))  # served in this process

Left running for days (``docs/operations.md``): ``memory_limit=`` and ``idle_timeout=`` per
cartridge, an activity timeout per call, ``retry=Retry(...)``, ``replace_cartridge`` and
``remove_cartridge`` with a drain, and ``engine.subscribe()`` for the events of it all.

The public names are resolved on first use (a module ``__getattr__`` over the table of their
home modules): a plain call needs none of the machine runs, graphs, relay, planner and
discovery, and building their attrs classes up front cost every process that imports the
engine (the ``cartridge call`` command among them) about 100 ms of CPU.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives: the module imported the first time the name is read.
_HOMES: dict[str, tuple[str, ...]] = {
    "_arguments": ("ArgumentError", "default_inputs"),
    "_call": ("InputValue", "Inputs"),
    "_config": ("EngineConfig",),
    "_connection._direct": ("DirectConnection", "direct_connection"),
    "_connection._links": ("Flow", "PeerOrigin"),
    "_connection._tap": ("FrameTap",),
    "_engine": ("CartridgeStatus", "Engine", "EngineStats", "discover"),
    "_errors": (
        "CallError",
        "CallTimeout",
        "CartridgeDied",
        "CartridgeNotFound",
        "CartridgeUnhealthy",
        "EngineClosed",
        "EngineError",
        "NoRoute",
        "SpawnFailed",
    ),
    "_events": (
        "CallEvent",
        "Item",
        "Log",
        "Metric",
        "OutputData",
        "OutputEnded",
        "OutputItem",
        "OutputResult",
        "OutputStarted",
        "Progress",
        "Result",
        "TraceEvent",
    ),
    "_graphs._result": ("GraphResult", "NodeResult"),
    "_graphs._session": ("Catalogue", "Graph"),
    "_inputs": ("CborValue", "ItemStream", "ValueStream"),
    "_machines._api": ("MachineRun",),
    "_machines._cache": ("CacheError", "CacheStore"),
    "_machines._events": (
        "ItemFinished",
        "ItemStarted",
        "MachineEvent",
        "MachineInputError",
        "MachineLog",
        "MachineOutputData",
        "MachineProgress",
        "MachineResult",
        "MachineRunError",
        "StepFinished",
        "StepReport",
        "StepStarted",
    ),
    "_machines._records": (
        "RunRecord",
        "RunRecorder",
        "default_runs_dir",
        "list_runs",
        "machine_digest",
        "read_events",
        "read_run",
        "step_totals",
    ),
    "_observe": ("CallInfo", "CallObserver", "CallOutcome"),
    "_output_check": ("OutputInvalid",),
    "_placements._inprocess": ("InProcess",),
    "_placements._seam": (
        "ByteSink",
        "Instance",
        "LaunchError",
        "LaunchSpec",
        "Placement",
        "Target",
    ),
    "_placements._subprocess": ("Subprocess",),
    "_relay._socket": ("HostSocketError", "check_peer", "peer_uid", "secure_socket_path"),
    "_replicas": ("ReplicaStatus",),
    "_response": ("CallContext", "Response"),
    "_supervision._errors": ("CartridgeRetired", "OutOfMemory"),
    "_supervision._lifecycle": (
        "CallRetried",
        "CallStalled",
        "CapsChanged",
        "CartridgeAdded",
        "CartridgeDrained",
        "CartridgeRemoved",
        "CartridgeReplaced",
        "EngineEvent",
        "HostLinkChanged",
        "InstanceChanged",
        "InstanceState",
        "Subscription",
    ),
    "_supervision._retry": ("Retry",),
}

#: Public names bound under another name in their home: name -> (home, name there).
_RENAMED: dict[str, tuple[str, str]] = {
    "default_step_cache_dir": ("_machines._records", "default_cache_dir"),
    # Left out of __all__: it needs the optional extra ``otel``.
    "OtelExporter": ("_otel", "OtelExporter"),
}

_EXPORTS: dict[str, tuple[str, str]] = {
    **{name: (home, name) for home, names in _HOMES.items() for name in names},
    **_RENAMED,
}

__all__ = (
    "Engine",
    "discover",
    "EngineConfig",
    "CallContext",
    "Response",
    "Result",
    "OutputResult",
    "Inputs",
    "InputValue",
    "Item",
    "CallEvent",
    "OutputStarted",
    "OutputData",
    "OutputItem",
    "OutputEnded",
    "Progress",
    "Log",
    "Metric",
    "TraceEvent",
    "CallObserver",
    "CallInfo",
    "CallOutcome",
    # OtelExporter is importable from here too, but left out of __all__: it needs the
    # optional extra ``otel`` (``from cartridge_runtime.engine import OtelExporter``).
    "CartridgeStatus",
    "ReplicaStatus",
    "EngineStats",
    "EngineError",
    "CallError",
    "ArgumentError",
    "default_inputs",
    "CallTimeout",
    "CartridgeDied",
    "CartridgeUnhealthy",
    "SpawnFailed",
    "CartridgeNotFound",
    "NoRoute",
    "EngineClosed",
    "OutOfMemory",
    "OutputInvalid",
    "CartridgeRetired",
    # supervision
    "Retry",
    "Subscription",
    "EngineEvent",
    "CartridgeAdded",
    "CartridgeReplaced",
    "CartridgeDrained",
    "CartridgeRemoved",
    "CapsChanged",
    "InstanceChanged",
    "InstanceState",
    "CallStalled",
    "CallRetried",
    "HostLinkChanged",
    "HostSocketError",
    "check_peer",
    "peer_uid",
    "secure_socket_path",
    # placements
    "Placement",
    "FrameTap",
    "Subprocess",
    "InProcess",
    "Instance",
    "ByteSink",
    "LaunchSpec",
    "LaunchError",
    "Target",
    # one connection driven by a test tool
    "DirectConnection",
    "direct_connection",
    "Flow",
    "PeerOrigin",
    # streamed inputs
    "CborValue",
    "ValueStream",
    "ItemStream",
    # machines
    "MachineRun",
    "Graph",
    "GraphResult",
    "NodeResult",
    "Catalogue",
    "CacheStore",
    "CacheError",
    "RunRecorder",
    "RunRecord",
    "read_run",
    "list_runs",
    "read_events",
    "step_totals",
    "machine_digest",
    "default_runs_dir",
    "default_step_cache_dir",
    "MachineResult",
    "StepReport",
    "MachineEvent",
    "StepStarted",
    "StepFinished",
    "ItemStarted",
    "ItemFinished",
    "MachineProgress",
    "MachineLog",
    "MachineOutputData",
    "MachineRunError",
    "MachineInputError",
)


def __getattr__(name: str) -> Any:
    found = _EXPORTS.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home, attribute = found
    value = getattr(importlib.import_module(f"{__name__}.{home}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only; names in __all__ re-export
    from ._arguments import ArgumentError, default_inputs
    from ._call import Inputs, InputValue
    from ._config import EngineConfig
    from ._connection._direct import DirectConnection, direct_connection
    from ._connection._links import Flow, PeerOrigin
    from ._connection._tap import FrameTap
    from ._engine import CartridgeStatus, Engine, EngineStats, discover
    from ._errors import (
        CallError,
        CallTimeout,
        CartridgeDied,
        CartridgeNotFound,
        CartridgeUnhealthy,
        EngineClosed,
        EngineError,
        NoRoute,
        SpawnFailed,
    )
    from ._events import (
        CallEvent,
        Item,
        Log,
        Metric,
        OutputData,
        OutputEnded,
        OutputItem,
        OutputResult,
        OutputStarted,
        Progress,
        Result,
        TraceEvent,
    )
    from ._graphs._result import GraphResult, NodeResult
    from ._graphs._session import Catalogue, Graph
    from ._inputs import CborValue, ItemStream, ValueStream
    from ._machines._api import MachineRun
    from ._machines._cache import CacheError, CacheStore
    from ._machines._events import (
        ItemFinished,
        ItemStarted,
        MachineEvent,
        MachineInputError,
        MachineLog,
        MachineOutputData,
        MachineProgress,
        MachineResult,
        MachineRunError,
        StepFinished,
        StepReport,
        StepStarted,
    )
    from ._machines._records import (
        RunRecord,
        RunRecorder,
        default_runs_dir,
        list_runs,
        machine_digest,
        read_events,
        read_run,
        step_totals,
    )
    from ._machines._records import default_cache_dir as default_step_cache_dir
    from ._observe import CallInfo, CallObserver, CallOutcome
    from ._otel import OtelExporter as OtelExporter
    from ._output_check import OutputInvalid
    from ._placements._inprocess import InProcess
    from ._placements._seam import ByteSink, Instance, LaunchError, LaunchSpec, Placement, Target
    from ._placements._subprocess import Subprocess
    from ._relay._socket import HostSocketError, check_peer, peer_uid, secure_socket_path
    from ._replicas import ReplicaStatus
    from ._response import CallContext, Response
    from ._supervision._errors import CartridgeRetired, OutOfMemory
    from ._supervision._lifecycle import (
        CallRetried,
        CallStalled,
        CapsChanged,
        CartridgeAdded,
        CartridgeDrained,
        CartridgeRemoved,
        CartridgeReplaced,
        EngineEvent,
        HostLinkChanged,
        InstanceChanged,
        InstanceState,
        Subscription,
    )
    from ._supervision._retry import Retry
