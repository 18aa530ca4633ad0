"""Where the ``cartridge`` commands that plan find their cartridges: ``--cartridge PATH``
(each started only if its manifest is needed) and ``--from-dir ROOT`` (every cartridge
installed there, read through the manifest cache, so a warm cache starts none; repeated, the
folders add up)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import attrs

from ..engine import Engine
from ._usage import UsageError

if TYPE_CHECKING:
    from ..discovery import RefusedCartridge
    from ..manifest import CapDef

__all__ = ("SourceError", "CartridgeSources", "PlanningCaps", "planning_engine", "planning_caps")


#: A usage error in the cartridge options (one line, exit 2, nothing started): the command's
#: one usage error, by the name the planning commands use.
SourceError = UsageError


@attrs.frozen(kw_only=True)
class CartridgeSources:
    """The cartridges a command plans over.

    :ivar cartridges: scripts, executables (or commands) given with ``--cartridge``.
    :ivar from_dirs: the folders of installed cartridges given with ``--from-dir``, in order.
    :ivar cache: the manifest cache folder (``None``: the per-user one).
    :ivar refresh: start every discovered cartridge again, even those the cache holds.
    """

    cartridges: tuple[Path, ...] = ()
    from_dirs: tuple[Path, ...] = ()
    cache: Path | None = None
    refresh: bool = False

    @classmethod
    def checked(
        cls,
        cartridges: Sequence[Path],
        from_dirs: Sequence[Path] | Path | None,
        cache: Path | None,
        *,
        refresh: bool = False,
    ) -> CartridgeSources:
        """The options, checked before anything starts.

        :raises SourceError: no cartridge at all, a missing one, a folder given as one, or a
            ``--from-dir`` that is not a folder.
        """
        if isinstance(from_dirs, Path):
            from_dirs = [from_dirs]
        folders = tuple(dict.fromkeys(from_dirs or ()))
        if not cartridges and not folders:
            raise SourceError(
                "give the cartridges to plan over: --cartridge PATH or --from-dir ROOT"
            )
        for path in cartridges:
            if path.is_dir():
                raise SourceError(
                    f"--cartridge {path}: is a directory (use --from-dir for a folder)"
                )
            if not path.exists():
                raise SourceError(f"--cartridge {path}: not found")
        for folder in folders:
            if not folder.is_dir():
                raise SourceError(f"--from-dir {folder}: not a folder")
        if cache is not None and cache.exists() and not cache.is_dir():
            raise SourceError(f"--cache {cache}: not a folder")
        return cls(cartridges=tuple(cartridges), from_dirs=folders, cache=cache, refresh=refresh)


@attrs.frozen(kw_only=True)
class PlanningCaps:
    """What the cartridges offer a planner.

    :ivar caps: every cap, in the order the cartridges were added (routing picks the first).
    :ivar serving: the cartridge serving each cap, by canonical cap URN (the first added).
    :ivar refused: the cartridges discovery refused, with the reasons.
    :ivar started: how many cartridge processes were started to read manifests.
    """

    caps: tuple[CapDef, ...]
    serving: dict[str, str]
    refused: tuple[RefusedCartridge, ...] = ()
    started: int = 0


@contextlib.asynccontextmanager
async def planning_engine(
    sources: CartridgeSources, refused: list[RefusedCartridge] | None = None
) -> AsyncIterator[Engine]:
    """A running engine with every cartridge of ``sources`` added (none started yet; those
    found with ``--from-dir`` carry their cached manifests). The cartridges discovery refuses
    are appended to ``refused``."""
    async with Engine() as engine:
        for path in sources.cartridges:
            engine.add_cartridge(str(path))
        for folder in sources.from_dirs:
            found = await engine.discover(folder, cache=sources.cache, refresh=sources.refresh)
            if refused is not None:
                refused.extend(found.refused)
        yield engine


async def _start_unknown(engine: Engine) -> None:
    """Start, side by side, every cartridge whose manifest is not known; the first failure,
    in the order added, is raised once all are done."""
    from ..errors import CartridgeRuntimeError

    failures: dict[str, BaseException] = {}

    async def start(name: str) -> None:
        try:
            await engine.start(name)
        except CartridgeRuntimeError as error:
            failures[name] = error

    names = [status.name for status in engine.status() if engine.manifest(status.name) is None]
    async with anyio.create_task_group() as group:
        for name in names:
            group.start_soon(start, name)
    for name in names:
        if name in failures:
            raise failures[name]


async def planning_caps(sources: CartridgeSources) -> PlanningCaps:
    """The caps of every cartridge of ``sources``, starting only those whose manifest is not
    known (then stopping them all).

    :raises SpawnFailed: a ``--cartridge`` failed to start.
    """
    refused: list[RefusedCartridge] = []
    async with planning_engine(sources, refused) as engine:
        await _start_unknown(engine)
        caps: list[CapDef] = []
        serving: dict[str, str] = {}
        for status in engine.status():
            manifest = engine.manifest(status.name)
            if manifest is None:
                continue
            for cap in manifest.all_caps():
                caps.append(cap)
                serving.setdefault(cap.urn, status.name)
        started = sum(status.starts for status in engine.status())
    return PlanningCaps(caps=tuple(caps), serving=serving, refused=tuple(refused), started=started)
