"""The call errors the supervision makes: an instance killed past its memory limit, and a call
ended because its cartridge was retired before the call finished."""

from __future__ import annotations

from ..._report import AttributionClass, ErrorCode
from .._errors import CallError, CartridgeDied

__all__ = ("CartridgeRetired", "OutOfMemory")


class OutOfMemory(CartridgeDied):
    """The engine killed the instance serving the call because its resident memory passed the
    cartridge's ``memory_limit`` (code ``OOM_KILLED``, class ``resource``; HST-19). The message
    names the limit and the last figure; the next call starts the instance again.

    :ivar resident: the last figure, bytes.
    :ivar limit: the limit, bytes.
    """

    def __init__(self, message: str, *, resident: int, limit: int, stderr_tail: str = "") -> None:
        super().__init__(message, stderr_tail=stderr_tail, code=ErrorCode.OOM_KILLED)
        self.attribution_class = AttributionClass.RESOURCE
        self.resident = resident
        self.limit = limit


class CartridgeRetired(CallError):
    """The call's cartridge was replaced or removed and the call did not finish within the
    drain (code ``CARTRIDGE_RETIRED``, class ``environment``; HST-21)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CARTRIDGE_RETIRED, AttributionClass.ENVIRONMENT, message)
