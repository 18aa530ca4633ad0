"""What a CBOR-mode session needs of the cartridge it serves, as narrow typed interfaces.

:class:`ServedCartridge` is the part of :class:`~cartridge_runtime.runtime.CartridgeRuntime` a
session uses (the runtime passes itself); :class:`Registrations` adapts it to the
:class:`~cartridge_runtime.protocol.HandlerTable` the sans-IO connection admits requests with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from cartridge_runtime.manifest import CapDef, Manifest, PoolTable
from cartridge_runtime.protocol import IDENTITY_CAP, Limits
from cartridge_runtime.urn import CapUrn, UrnError

from .._cartridge_context import CartridgeContext
from .._context import Op

#: What makes a fresh handler for each request.
OpFactory = Callable[[], Op]

_IDENTITY = CapUrn.parse(IDENTITY_CAP)


class ServedCartridge(Protocol):
    """The cartridge a session serves."""

    @property
    def limits(self) -> Limits:
        """The limits this side proposes in HELLO."""
        ...

    @property
    def max_open_requests(self) -> int: ...

    @property
    def manifest(self) -> Manifest: ...

    @property
    def context(self) -> CartridgeContext:
        """What every request shares (resources, the contexts of each call)."""
        ...

    def find_handler(self, cap_urn: str) -> tuple[str, OpFactory] | None: ...

    def cap_def_for(self, request_urn: str, handler_urn: str) -> CapDef | None: ...

    def make_pools(self) -> PoolTable[Any]: ...


class Registrations:
    """A cartridge's handlers as the connection asks about them (``HandlerTable``)."""

    __slots__ = ("_cartridge",)

    def __init__(self, cartridge: ServedCartridge) -> None:
        self._cartridge = cartridge

    def find_handler(self, cap_urn: str) -> tuple[str, OpFactory] | None:
        return self._cartridge.find_handler(cap_urn)

    def is_identity(self, cap_urn: str) -> bool:
        try:
            return CapUrn.parse(cap_urn).is_equivalent(_IDENTITY)
        except UrnError:
            return False

    def pool_name(self, handler_urn: str) -> str:
        return str(CapUrn.parse(handler_urn))
