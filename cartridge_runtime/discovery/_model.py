"""What discovery answers: the cartridges found, those refused and why, and what it cost."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from ..manifest import CAP_IDENTITY, CapDef, Manifest

__all__ = (
    "StartFailure",
    "ManifestStarter",
    "CartridgeHost",
    "LayoutKind",
    "RefusalKind",
    "InstallRecord",
    "FoundCartridge",
    "RefusedCartridge",
    "Discovery",
)


@attrs.frozen
class StartFailure:
    """Why a candidate did not start; ``transient`` when it ran out of time (the next discovery
    tries again) rather than failing on its own (remembered until it changes)."""

    reason: str
    transient: bool = False


class ManifestStarter(Protocol):
    """What reads the manifests the cache does not hold: it starts each command once and
    answers, in order, its manifest or why it did not start, and how many processes it
    started (DSC-11). The engine gives one (:meth:`Engine.discover
    <cartridge_runtime.engine.Engine.discover>`); tests may give their own."""

    async def __call__(
        self, commands: Sequence[tuple[str, ...]]
    ) -> tuple[list[Manifest | StartFailure], int]: ...


class CartridgeHost(Protocol):
    """What :meth:`FoundCartridge.add_to` needs of an engine."""

    def add_cartridge(
        self, target: Any, *, name: str | None = None, manifest: Manifest | None = None
    ) -> str: ...


class LayoutKind(enum.StrEnum):
    """Where a cartridge was found (DSC-2, DSC-3)."""

    SCRIPT = "script"  #: a ``.py`` or ``.js`` script in the root folder
    EXECUTABLE = "executable"  #: an executable file in the root folder
    INSTALLED = "installed"  #: a version folder with a ``cartridge.json``


class RefusalKind(enum.StrEnum):
    """Why a cartridge found on disk is not hosted (DSC-5 to DSC-8)."""

    MANIFEST_INVALID = "manifest_invalid"  #: ``cartridge.json`` missing, unreadable or malformed
    ENTRY_MISSING = "entry_missing"  #: its entry does not exist
    ENTRY_NOT_EXECUTABLE = "entry_not_executable"  #: its entry has no execute permission
    ENTRY_ESCAPES = "entry_escapes"  #: its entry points outside the version folder
    MISPLACED = "misplaced"  #: channel or registry disagree with the folder it sits in
    BUNDLE_UNPROVEN = "bundle_unproven"  #: claims to be bundled; nothing here proves it
    SUPERSEDED = "superseded"  #: an older version beside a newer one
    NO_VERSION = "no_version"  #: a cartridge name folder with no version folder in it
    HANDSHAKE_FAILED = "handshake_failed"  #: it did not start: spawn, HELLO or manifest failed


@attrs.frozen(kw_only=True)
class InstallRecord:
    """An installed version's ``cartridge.json`` (DSC-4): the install's identity and entry.

    :ivar registry_url: the registry it came from; ``None`` for a dev install.
    :ivar entry: the entry point, relative to the version folder.
    :ivar installed_from: provenance (``registry``, ``dev``, ``bundle``...), if recorded.
    """

    name: str
    version: str
    channel: str
    registry_url: str | None
    entry: str
    installed_at: str
    installed_from: str | None = None
    fabric_manifest_version: int = 0


@attrs.frozen(kw_only=True)
class FoundCartridge:
    """A cartridge that can be hosted, with the manifest it gave.

    :ivar name: its manifest's name (the install record's name is in ``install``).
    :ivar version: its manifest's version.
    :ivar manifest: the manifest it gave in HELLO (from the cache or a fresh start).
    :ivar layout: where it was found.
    :ivar where: the file (script, executable) or the version folder (installed).
    :ivar entry: the file that is run.
    :ivar command: the argv that runs it, what ``Engine.add_cartridge`` takes.
    :ivar install: the ``cartridge.json`` record, for an installed cartridge.
    :ivar digest: the cache key its manifest is stored under (DSC-9).
    :ivar from_cache: whether the manifest came from the cache (no process was started).
    """

    name: str
    version: str
    manifest: Manifest = attrs.field(eq=False, repr=False)
    layout: LayoutKind
    where: Path
    entry: Path
    command: tuple[str, ...]
    install: InstallRecord | None = None
    digest: str
    from_cache: bool

    @property
    def caps(self) -> tuple[CapDef, ...]:
        """Every cap its manifest declares, in declaration order."""
        return tuple(self.manifest.iter_caps())

    @property
    def cap_urns(self) -> tuple[str, ...]:
        """The canonical URN of every cap (what ``add_cartridge(known_caps=...)`` takes)."""
        return tuple(cap.urn for cap in self.manifest.iter_caps())

    @property
    def aliases(self) -> tuple[str, ...]:
        """Each cap by its first alias (its URN when it has none), the identity cap every
        cartridge serves left out: what the cartridge offers, in a word each."""
        return tuple(
            cap.aliases[0] if cap.aliases else cap.urn
            for cap in self.manifest.iter_caps()
            if cap.urn != CAP_IDENTITY
        )

    def add_to(self, engine: CartridgeHost) -> str:
        """Register this cartridge with ``engine`` (``Engine.add_cartridge``) under its
        manifest's name, its manifest known up front, so calls route to it and plans read its
        caps before it ever starts; returns the engine's name for it.

        :raises CartridgeNotFound: the entry has gone since discovery.
        """
        return engine.add_cartridge(list(self.command), name=self.name, manifest=self.manifest)


@attrs.frozen(kw_only=True)
class RefusedCartridge:
    """A cartridge found on disk that is not hosted, and why (one line for a person).

    :ivar name: the name it goes by (its record's, or its folder's), if known.
    :ivar version: its version (its record's, or its folder's), if known.
    """

    path: Path
    kind: RefusalKind
    reason: str
    name: str | None = None
    version: str | None = None


@attrs.frozen(kw_only=True)
class Discovery:
    """Everything under one root: found and refused cartridges, and the cost of finding them.

    :ivar found: hostable cartridges, sorted by ``where``.
    :ivar refused: the others, sorted by ``path``.
    :ivar cache_hits: manifests (and remembered start-up failures) read from the cache.
    :ivar spawns: cartridge processes started to read a manifest.
    :ivar cache_dir: where manifests are cached (``None``: no cache).
    :ivar cache_errors: cache files that could not be written (discovery went on without them).
    """

    root: Path
    found: tuple[FoundCartridge, ...]
    refused: tuple[RefusedCartridge, ...]
    cache_hits: int
    spawns: int
    cache_dir: Path | None
    cache_errors: tuple[str, ...] = ()
