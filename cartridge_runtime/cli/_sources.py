"""Where the ``cartridge`` commands that plan find their cartridges: ``--cartridge PATH``
(each started only if its manifest is needed) and ``--from-dir ROOT`` (every cartridge
installed there, read through the manifest cache, so a warm cache starts none)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs

from ..engine import Engine
from ._usage import UsageError

__all__ = ("SourceError", "CartridgeSources", "planning_engine")


#: A usage error in the cartridge options (one line, exit 2, nothing started): the command's
#: one usage error, by the name the planning commands use.
SourceError = UsageError


@attrs.frozen(kw_only=True)
class CartridgeSources:
    """The cartridges a command plans over.

    :ivar cartridges: scripts, executables (or commands) given with ``--cartridge``.
    :ivar from_dir: the folder of installed cartridges given with ``--from-dir``.
    :ivar cache: the manifest cache folder (``None``: the per-user one).
    """

    cartridges: tuple[Path, ...] = ()
    from_dir: Path | None = None
    cache: Path | None = None

    @classmethod
    def checked(
        cls, cartridges: Sequence[Path], from_dir: Path | None, cache: Path | None
    ) -> CartridgeSources:
        """The options, checked before anything starts.

        :raises SourceError: no cartridge at all, a missing one, a folder given as one, or a
            ``--from-dir`` that is not a folder.
        """
        if not cartridges and from_dir is None:
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
        if from_dir is not None and not from_dir.is_dir():
            raise SourceError(f"--from-dir {from_dir}: not a folder")
        if cache is not None and cache.exists() and not cache.is_dir():
            raise SourceError(f"--cache {cache}: not a folder")
        return cls(cartridges=tuple(cartridges), from_dir=from_dir, cache=cache)


@contextlib.asynccontextmanager
async def planning_engine(sources: CartridgeSources) -> AsyncIterator[Engine]:
    """A running engine with every cartridge of ``sources`` added (none started yet; those
    found with ``--from-dir`` carry their cached manifests)."""
    async with Engine() as engine:
        for path in sources.cartridges:
            engine.add_cartridge(str(path))
        if sources.from_dir is not None:
            await engine.discover(sources.from_dir, cache=sources.cache)
        yield engine
