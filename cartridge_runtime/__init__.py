"""cartridge-runtime: write, run, drive and certify Bifaci v6 cartridges in Python.

The most used names are re-exported here; each lives in a subpackage:

* :mod:`cartridge_runtime.runtime` — writing a cartridge (``CartridgeRuntime``, ``Op``, ...)
* :mod:`cartridge_runtime.manifest` — the manifest model (``Manifest``, ``CapDef``, ...)
* :mod:`cartridge_runtime.engine` — driving cartridges (``Engine``, ``CallError``, ...)
* :mod:`cartridge_runtime.testing` — the in-process harness and ``check_cartridge``
* :mod:`cartridge_runtime.urn` — media and cap URNs
* :mod:`cartridge_runtime.protocol` — the sans-IO protocol core

Names are imported on first use, so ``import cartridge_runtime`` stays cheap (a cartridge's
cold start pays only for what it uses).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

_EXPORTS: dict[str, str] = {
    # writing a cartridge
    "CartridgeRuntime": "runtime",
    "Op": "runtime",
    "DryContext": "runtime",
    "WetContext": "runtime",
    "Request": "runtime",
    "InputPackage": "runtime",
    "InputStream": "runtime",
    "OutputStream": "runtime",
    "CartridgeError": "runtime",
    "OpError": "runtime",
    "MissingInput": "runtime",
    "UnknownOutput": "runtime",
    # manifests
    "Manifest": "manifest",
    "CapDef": "manifest",
    "ArgDef": "manifest",
    "OutputDef": "manifest",
    "StdinSource": "manifest",
    "PositionSource": "manifest",
    "CliFlagSource": "manifest",
    "ManifestError": "manifest",
    # driving cartridges
    "Engine": "engine",
    "EngineConfig": "engine",
    "CallError": "engine",
    "CartridgeDied": "engine",
    "SpawnFailed": "engine",
    # testing
    "CartridgeHarness": "testing",
    "check_cartridge": "testing",
    # URNs and the protocol
    "MediaUrn": "urn",
    "CapUrn": "urn",
    "UrnError": "urn",
    "ProtocolError": "protocol",
}

__all__ = ("__version__", *_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cartridge_runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .engine import CallError, CartridgeDied, Engine, EngineConfig, SpawnFailed
    from .manifest import (
        ArgDef,
        CapDef,
        CliFlagSource,
        Manifest,
        ManifestError,
        OutputDef,
        PositionSource,
        StdinSource,
    )
    from .protocol import ProtocolError
    from .runtime import (
        CartridgeError,
        CartridgeRuntime,
        DryContext,
        InputPackage,
        InputStream,
        MissingInput,
        Op,
        OpError,
        OutputStream,
        Request,
        UnknownOutput,
        WetContext,
    )
    from .testing import CartridgeHarness, check_cartridge
    from .urn import CapUrn, MediaUrn, UrnError
