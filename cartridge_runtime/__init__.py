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
    "CartridgeRuntimeError": "protocol",
    "ErrorReport": "protocol",
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
    # "X as X" marks each name as an explicit re-export of the lazy __getattr__ above.
    from .engine import (
        CallError as CallError,
    )
    from .engine import (
        CartridgeDied as CartridgeDied,
    )
    from .engine import (
        Engine as Engine,
    )
    from .engine import (
        EngineConfig as EngineConfig,
    )
    from .engine import (
        SpawnFailed as SpawnFailed,
    )
    from .manifest import (
        ArgDef as ArgDef,
    )
    from .manifest import (
        CapDef as CapDef,
    )
    from .manifest import (
        CliFlagSource as CliFlagSource,
    )
    from .manifest import (
        Manifest as Manifest,
    )
    from .manifest import (
        ManifestError as ManifestError,
    )
    from .manifest import (
        OutputDef as OutputDef,
    )
    from .manifest import (
        PositionSource as PositionSource,
    )
    from .manifest import (
        StdinSource as StdinSource,
    )
    from .protocol import CartridgeRuntimeError as CartridgeRuntimeError
    from .protocol import ErrorReport as ErrorReport
    from .protocol import ProtocolError as ProtocolError
    from .runtime import (
        CartridgeError as CartridgeError,
    )
    from .runtime import (
        CartridgeRuntime as CartridgeRuntime,
    )
    from .runtime import (
        DryContext as DryContext,
    )
    from .runtime import (
        InputPackage as InputPackage,
    )
    from .runtime import (
        InputStream as InputStream,
    )
    from .runtime import (
        MissingInput as MissingInput,
    )
    from .runtime import (
        Op as Op,
    )
    from .runtime import (
        OpError as OpError,
    )
    from .runtime import (
        OutputStream as OutputStream,
    )
    from .runtime import (
        Request as Request,
    )
    from .runtime import (
        UnknownOutput as UnknownOutput,
    )
    from .runtime import (
        WetContext as WetContext,
    )
    from .testing import CartridgeHarness as CartridgeHarness
    from .testing import check_cartridge as check_cartridge
    from .urn import CapUrn as CapUrn
    from .urn import MediaUrn as MediaUrn
    from .urn import UrnError as UrnError
