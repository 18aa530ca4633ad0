"""The URNs of a machine: the structural order canonical machines sort by (MCH-7), and the
relations resolution asks, remembered.

The order itself belongs to the URN values (:meth:`MediaUrn.ordering_key`,
:meth:`CapUrn.ordering_key`, and ``<`` on both); these two names keep the machine code's
sort keys short.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from cartridge_runtime.manifest import ArgDef, StdinSource
from cartridge_runtime.urn import MEDIA_VOID, CapUrn, MediaUrn

__all__ = (
    "media_key",
    "cap_key",
    "conforms",
    "equivalent",
    "comparable",
    "media",
    "main_input_media",
    "is_main_input",
)

MediaKey = tuple[str, tuple[tuple[str, str], ...]]


@functools.lru_cache(maxsize=4096)
def media_key(media: MediaUrn) -> MediaKey:
    """The sort key of a media URN (:meth:`MediaUrn.ordering_key`, cached)."""
    return media.ordering_key()


def cap_key(cap: CapUrn) -> tuple[MediaKey, MediaKey, int, tuple[tuple[str, str], ...]]:
    """The sort key of a cap URN (:meth:`CapUrn.ordering_key`)."""
    return cap.ordering_key()


# The relations, remembered: a machine asks the same few questions of the same few URNs many
# times (every step of a cap, every node of a type), and URNs are immutable values.


_CONFORMS: dict[tuple[str, str], bool] = {}
_EQUIVALENT: dict[tuple[str, str], bool] = {}
_COMPARABLE: dict[tuple[str, str], bool] = {}
#: Pairs remembered per relation before the memory starts afresh.
_REMEMBERED: Final = 16384


def _asked(memory: dict[tuple[str, str], bool], a: MediaUrn, b: MediaUrn, answer: Any) -> bool:
    key = (a.text, b.text)
    known = memory.get(key)
    if known is None:
        if len(memory) >= _REMEMBERED:
            memory.clear()
        known = memory[key] = answer(a, b)
    return known


def conforms(a: MediaUrn, b: MediaUrn) -> bool:
    """``a.conforms_to(b)``."""
    return _asked(_CONFORMS, a, b, MediaUrn.conforms_to)


def equivalent(a: MediaUrn, b: MediaUrn) -> bool:
    """``a.is_equivalent(b)``."""
    return _asked(_EQUIVALENT, a, b, MediaUrn.is_equivalent)


def comparable(a: MediaUrn, b: MediaUrn) -> bool:
    """``a.is_comparable(b)``."""
    return _asked(_COMPARABLE, a, b, MediaUrn.is_comparable)


_VOID: Final = MediaUrn.parse(MEDIA_VOID)


def media(text: str) -> MediaUrn:
    """A media URN from a cap definition (the manifest model has already checked it)."""
    return MediaUrn.parse(text)


def main_input_media(cap: CapUrn) -> MediaUrn | None:
    """What a cap's main input accepts (its ``in=``), or None for a cap that takes none."""
    return None if equivalent(cap.in_spec, _VOID) else cap.in_spec


def is_main_input(arg: ArgDef, in_spec: MediaUrn) -> bool:
    """Whether ``arg`` is the main input: a stdin source equivalent to ``in=``."""
    return any(
        isinstance(source, StdinSource) and equivalent(media(source.media_urn), in_spec)
        for source in arg.sources
    )
