"""Testing helpers: an in-process harness for runtimes and ops, and (when present) the
conformance check ``check_cartridge``."""

from __future__ import annotations

from ._harness import (
    CallResult,
    CartridgeHarness,
    ErrorReport,
    HarnessCall,
    Input,
    InputSpec,
    Item,
    PeerHandler,
    PeerReply,
    StreamResult,
    call_sync,
    memory_byte_pipe,
    run_op,
)

__all__: tuple[str, ...] = (
    "CartridgeHarness",
    "HarnessCall",
    "CallResult",
    "StreamResult",
    "ErrorReport",
    "Input",
    "Item",
    "InputSpec",
    "PeerHandler",
    "PeerReply",
    "run_op",
    "call_sync",
    "memory_byte_pipe",
)

try:
    from ._check import check_cartridge
except ImportError:  # written by the conformance kit; absent until then
    pass
else:
    __all__ = (*__all__, "check_cartridge")
