"""Discovery of installed cartridges: find every cartridge under a folder and read its
manifest, from a cache keyed by content digest so that a warm discovery starts no process.

Example::

    discovery = await engine.discover("~/cartridges")   # found ones are added to engine
    for cartridge in discovery.found:
        print(cartridge.name, cartridge.version, cartridge.aliases)
    for refused in discovery.refused:
        print(refused.path, refused.reason)

Two layouts are understood, side by side under one root: a plain folder of cartridge scripts
(``.py`` holding a cartridge, ``.js``) and executables; and installed version folders, each
holding a ``cartridge.json`` (including the managed tree
``{slug}/v{N}/{channel}/{name}/{version}``). The rules are DSC-1 to DSC-12 of the protocol
spec's chapter 15.
"""

from __future__ import annotations

from ._cache import default_cache_dir
from ._discover import find_installed
from ._errors import DiscoveryError, RootNotFound
from ._model import (
    CartridgeHost,
    Discovery,
    FoundCartridge,
    InstallRecord,
    LayoutKind,
    ManifestStarter,
    RefusalKind,
    RefusedCartridge,
    StartFailure,
)

__all__ = (
    "find_installed",
    "ManifestStarter",
    "StartFailure",
    "CartridgeHost",
    "Discovery",
    "FoundCartridge",
    "RefusedCartridge",
    "InstallRecord",
    "LayoutKind",
    "RefusalKind",
    "default_cache_dir",
    "DiscoveryError",
    "RootNotFound",
)
