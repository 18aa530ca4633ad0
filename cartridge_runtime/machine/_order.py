"""The structural order of URNs that canonical machines sort by (MCH-7).

The order itself belongs to the URN values (:meth:`MediaUrn.ordering_key`,
:meth:`CapUrn.ordering_key`, and ``<`` on both); these two names keep the machine code's
sort keys short.
"""

from __future__ import annotations

from cartridge_runtime.urn import CapUrn, MediaUrn

__all__ = ("media_key", "cap_key")

MediaKey = tuple[str, tuple[tuple[str, str], ...]]


def media_key(media: MediaUrn) -> MediaKey:
    """The sort key of a media URN (:meth:`MediaUrn.ordering_key`)."""
    return media.ordering_key()


def cap_key(cap: CapUrn) -> tuple[MediaKey, MediaKey, int, tuple[tuple[str, str], ...]]:
    """The sort key of a cap URN (:meth:`CapUrn.ordering_key`)."""
    return cap.ordering_key()
