"""The structural order of URNs that canonical machines sort by (MCH-7).

Media URNs order by prefix, then their tags as ``(key, stored value)`` pairs in key order;
cap URNs by ``in=``, ``out=`` (as media URNs), the effect (declared, none, patch, any), then
their other tags likewise. This is the reference's order, not the order of the canonical text
(which differs wherever one key begins another, ``file`` and ``file-path``).
"""

from __future__ import annotations

import functools
from typing import Final

from cartridge_runtime.urn import CapEffect, CapUrn, MediaUrn

__all__ = ("media_key", "cap_key")

_EFFECT_RANK: Final = {
    CapEffect.DECLARED: 0,
    CapEffect.NONE: 1,
    CapEffect.PATCH: 2,
    CapEffect.ANY: 3,
}

MediaKey = tuple[str, tuple[tuple[str, str], ...]]


@functools.lru_cache(maxsize=4096)
def media_key(media: MediaUrn) -> MediaKey:
    """The sort key of a media URN (cached: URNs are immutable)."""
    return ("media", tuple(sorted(media.tags.items())))


def cap_key(cap: CapUrn) -> tuple[MediaKey, MediaKey, int, tuple[tuple[str, str], ...]]:
    """The sort key of a cap URN."""
    return (
        media_key(cap.in_spec),
        media_key(cap.out_spec),
        _EFFECT_RANK[cap.effect],
        tuple(sorted(cap.tags.items())),
    )
