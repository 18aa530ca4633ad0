"""Planning on an engine: from what the caller has to what they want, over the caps of the
engine's cartridges.

:meth:`Engine.plan <cartridge_runtime.engine.Engine.plan>` reads the caps as machine
resolution does (a manifest known ahead, as a discovery's cache gives it, is read without
starting the cartridge; another cartridge is started only to read its manifest), tells the
source's media URN (given, or detected from files), and asks the sans-IO planner for the
ranked plans (PLAN-8 .. PLAN-14). Each plan's machine resolves against the same caps, so
``engine.run_machine(plan.machine, ...)`` runs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import anyio.to_thread
import attrs

from ..planner import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_DEPTH,
    InputSet,
    Plan,
    find_paths,
    resolve_inputs,
)
from ..urn import MediaUrn
from ._errors import EngineError
from ._machines._text import ManifestSource, engine_caps

__all__ = ("PlanSource", "PlanningQuery", "source_of", "plan_on")

#: What a source may be: a media URN, a file (or folder, or glob) or several, or bytes.
PlanSource = str | MediaUrn | os.PathLike[str] | Sequence[str | os.PathLike[str]] | bytes


@attrs.frozen(kw_only=True)
class PlanningQuery:
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


def source_of(
    source: PlanSource,
    *,
    media: str | MediaUrn | None = None,
    is_sequence: bool | None = None,
) -> PlanningQuery:
    """The planner's view of ``source`` (blocking: it may read the first bytes of files).

    :param source: a media URN (``"media:..."`` or a :class:`MediaUrn`); a path, folder or
        glob, or a list of them (detected: DET-1 .. DET-10); or ``bytes`` with ``media``.
    :param media: the declared media URN; it wins over detection (DET-1).
    :param is_sequence: say the source is (or is not) a sequence; by default a URN or bytes
        is one value and files follow DET-10.
    :raises EngineError: ``bytes`` without ``media``.
    :raises InputError: a file that cannot be found or read, a glob that matches nothing.
    :raises UrnError: a media URN that does not parse.
    """
    if isinstance(source, MediaUrn) or _is_media_text(source):
        urn = source if isinstance(source, MediaUrn) else MediaUrn.parse(str(source))
        return PlanningQuery(media=urn, is_sequence=bool(is_sequence))
    if isinstance(source, bytes | bytearray | memoryview):
        if media is None:
            raise EngineError("plan: bytes need media= (the media URN they are)")
        urn = media if isinstance(media, MediaUrn) else MediaUrn.parse(media)
        return PlanningQuery(media=urn, is_sequence=bool(is_sequence))
    paths: Iterable[str | os.PathLike[str]]
    paths = [source] if isinstance(source, str | os.PathLike) else list(source)
    inputs = resolve_inputs(paths, declared=media)
    common = inputs.common_media
    if common is None:
        # A mixed set plans from what every file is (their least upper bound).
        common = MediaUrn.least_upper_bound(f.media for f in inputs.files)
    sequence = inputs.is_sequence if is_sequence is None else is_sequence
    return PlanningQuery(media=common, is_sequence=sequence, inputs=inputs)


async def plan_on(
    engine: ManifestSource,
    names: Sequence[str],
    query: PlanningQuery,
    target: str | MediaUrn,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limit: int = DEFAULT_LIMIT,
) -> list[Plan]:
    """The ranked plans from ``query`` to ``target`` over the caps of ``names`` (best first;
    none is an empty list).

    :raises SpawnFailed: a cartridge whose manifest is not known failed to start.
    :raises PlannerError: a target that is not a media URN, a bad depth or limit.
    """
    caps = await engine_caps(engine, names)
    return await anyio.to_thread.run_sync(
        lambda: find_paths(
            caps,
            query.media,
            target,
            is_sequence=query.is_sequence,
            max_depth=max_depth,
            limit=limit,
        )
    )
