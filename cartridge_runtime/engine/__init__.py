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
"""

from __future__ import annotations

from ._call import Inputs, InputValue
from ._config import EngineConfig
from ._engine import CartridgeStatus, Engine, EngineStats
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
    OutputData,
    OutputEnded,
    OutputItem,
    OutputResult,
    OutputStarted,
    Progress,
    Result,
)
from ._inprocess import InProcess
from ._inputs import CborValue, ItemStream, ValueStream
from ._machine_api import MachineRun
from ._machine_events import (
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
from ._placement import ByteSink, Instance, LaunchError, LaunchSpec, Placement, Target
from ._replicas import ReplicaStatus
from ._response import CallContext, Response
from ._subprocess import Subprocess

__all__ = (
    "Engine",
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
    "CartridgeStatus",
    "ReplicaStatus",
    "EngineStats",
    "EngineError",
    "CallError",
    "CallTimeout",
    "CartridgeDied",
    "CartridgeUnhealthy",
    "SpawnFailed",
    "CartridgeNotFound",
    "NoRoute",
    "EngineClosed",
    # placements
    "Placement",
    "Subprocess",
    "InProcess",
    "Instance",
    "ByteSink",
    "LaunchSpec",
    "LaunchError",
    "Target",
    # streamed inputs
    "CborValue",
    "ValueStream",
    "ItemStream",
    # machines
    "MachineRun",
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
