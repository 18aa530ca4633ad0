"""Records made in one C call: an instance of a slotted class from its fields' values.

A plain record (a frozen ``attrs`` class, a ``__slots__`` class whose ``__init__`` only sets
its fields) costs a Python call and a store per field to make; :func:`slotted_maker` gives a
compiled maker that sets the slots straight (``_speedups.make_slotted``), for a class it has
checked: no instance dict, and no slot left out of the names it was given.
``CARTRIDGE_RUNTIME_PURE_PYTHON=1`` switches it off.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

from ._constants import PURE_PYTHON_ENV

T = TypeVar("T")

__all__ = ("slotted_maker",)


def slotted_maker(cls: type[T], names: tuple[str, ...]) -> Callable[..., T] | None:
    """What makes an instance of the slotted class ``cls`` from the values of its fields
    ``names``, positionally, in one C call: its slots set, ``__init__`` not run (for a plain
    record such as a frozen ``attrs`` class, whose ``__init__`` only sets them). ``None``
    when not compiled, switched off, or ``cls`` keeps a dict or a slot not named."""
    if os.environ.get(PURE_PYTHON_ENV):
        return None
    try:
        from ._speedups import make_slotted, slot_maker
    except ImportError:  # pragma: no cover - the extension is optional
        return None
    try:
        maker = slot_maker(cls, names)
    except (TypeError, ValueError):
        return None
    make: Callable[..., T] = functools.partial(make_slotted, maker)
    return make
