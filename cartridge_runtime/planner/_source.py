"""A planning source: what the caller has, as the planner takes it (a media URN and whether it
is a sequence), told from a media URN, bytes with their media URN, or files (detected: DET-1 ..
DET-10). Blocking: detection reads the first bytes of files; the engine calls it in a worker
thread."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import attrs

from ..errors import DefinitionError
from ..urn import MediaUrn
from ._detect import InputSet, resolve_inputs

__all__ = ("SourceLike", "PlanningSource", "planning_source")

#: What a source may be: a media URN, a file (or folder, or glob) or several, or bytes.
SourceLike = str | MediaUrn | os.PathLike[str] | Sequence[str | os.PathLike[str]] | bytes


@attrs.frozen(kw_only=True)
class PlanningSource:
    """A source as the planner takes it.

    :ivar media: the source's media URN.
    :ivar is_sequence: whether the source is a sequence of values (several files, a folder).
    :ivar inputs: the files it came from, detected, or ``None`` for a URN or bytes.
    """

    media: MediaUrn
    is_sequence: bool
    inputs: InputSet | None = None


def _is_media_text(value: object) -> bool:
    return isinstance(value, str) and value.startswith("media:")


def planning_source(
    source: SourceLike,
    *,
    media: str | MediaUrn | None = None,
    is_sequence: bool | None = None,
) -> PlanningSource:
    """The planner's view of ``source`` (blocking: it may read the first bytes of files).

    :param source: a media URN (``"media:..."`` or a :class:`MediaUrn`); a path, folder or
        glob, or a list of them (detected: DET-1 .. DET-10); or ``bytes`` with ``media``.
    :param media: the declared media URN; it wins over detection (DET-1).
    :param is_sequence: say the source is (or is not) a sequence; by default a URN or bytes
        is one value and files follow DET-10.
    :raises DefinitionError: ``bytes`` without ``media``.
    :raises InputError: a file that cannot be found or read, a glob that matches nothing.
    :raises UrnError: a media URN that does not parse.
    """
    if isinstance(source, MediaUrn) or _is_media_text(source):
        urn = source if isinstance(source, MediaUrn) else MediaUrn.parse(str(source))
        return PlanningSource(media=urn, is_sequence=bool(is_sequence))
    if isinstance(source, bytes | bytearray | memoryview):
        if media is None:
            raise DefinitionError("a source of bytes needs media= (the media URN they are)")
        urn = media if isinstance(media, MediaUrn) else MediaUrn.parse(media)
        return PlanningSource(media=urn, is_sequence=bool(is_sequence))
    paths: Iterable[str | os.PathLike[str]]
    paths = [source] if isinstance(source, str | os.PathLike) else list(source)
    inputs = resolve_inputs(paths, declared=media)
    common = inputs.common_media
    if common is None:
        # A mixed set plans from what every file is (their least upper bound).
        common = MediaUrn.least_upper_bound(f.media for f in inputs.files)
    sequence = inputs.is_sequence if is_sequence is None else is_sequence
    return PlanningSource(media=common, is_sequence=sequence, inputs=inputs)
