"""Discovery's errors: one branch of the package's error tree.

::

    CartridgeRuntimeError
    └── DiscoveryError              a root that cannot be searched at all
        └── RootNotFound            the root does not exist, or is not a folder

A cartridge that cannot be hosted is not an error: it is listed with its reason
(:class:`~cartridge_runtime.discovery.RefusedCartridge`).
"""

from __future__ import annotations

import os
from typing import Any

from ..protocol import AttributionClass, CartridgeRuntimeError, ErrorCode

__all__ = ("DiscoveryError", "RootNotFound")


def _restore(cls: type[DiscoveryError], args: tuple[Any, ...]) -> DiscoveryError:
    """Unpickle one of these errors: its class without ``__init__`` (the fields come back as its
    state), whatever the subclass's constructor takes."""
    return cls.__new__(cls, *args)


class DiscoveryError(CartridgeRuntimeError):
    """Root of discovery's errors: a root that cannot be searched (DSC-1).

    :ivar path: the root concerned.
    """

    code = ErrorCode.INVALID_INPUT
    attribution_class = AttributionClass.INPUT

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        super().__init__(message)
        self.path = os.fspath(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args), dict(self.__dict__))


class RootNotFound(DiscoveryError):
    """The root folder does not exist, or is not a folder."""

    def __init__(self, path: str | os.PathLike[str], reason: str = "no such folder") -> None:
        super().__init__(f"{reason}: {os.fspath(path)}", path=path)
