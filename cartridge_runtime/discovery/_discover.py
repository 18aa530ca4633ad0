"""``find_installed(root, starter=...)``: every cartridge installed under a folder, with its
manifest, starting only those whose manifest the cache does not hold.

Rules (chapter 15 of the protocol spec):

1. The root must be an existing folder; anything found under it is either found (hostable,
   with its manifest) or refused (with its reason), never dropped (DSC-1, DSC-12).
2. A manifest comes from the cache when the cartridge's digest is there, else from starting
   the cartridge once through the engine (DSC-9 to DSC-11). A remembered start-up failure
   counts only while the interpreter and its packages are unchanged (DSC-13).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from ._cache import CacheEntry, ManifestCache, cache_key, default_cache_dir, environment_stamp
from ._digests import FileDigests
from ._errors import RootNotFound
from ._model import (
    Discovery,
    FoundCartridge,
    ManifestStarter,
    RefusalKind,
    RefusedCartridge,
    StartFailure,
)
from ._scan import Candidate, scan

__all__ = ("find_installed",)


def _found(candidate: Candidate, entry: CacheEntry, key: str, hit: bool) -> FoundCartridge:
    assert entry.manifest is not None
    return FoundCartridge(
        name=entry.manifest.name,
        version=entry.manifest.version,
        manifest=entry.manifest,
        layout=candidate.layout,
        where=candidate.where,
        entry=candidate.entry,
        command=candidate.command,
        install=candidate.install,
        digest=key,
        from_cache=hit,
    )


def _refused(candidate: Candidate, kind: RefusalKind, reason: str) -> RefusedCartridge:
    install = candidate.install
    return RefusedCartridge(
        path=candidate.where,
        kind=kind,
        reason=reason,
        name=install.name if install is not None else candidate.entry.stem,
        version=install.version if install is not None else None,
    )


def _checked_root(root: str | os.PathLike[str]) -> Path:
    """DSC-1: the root, absolute, when it is an existing folder."""
    path = Path(os.path.expanduser(root)).absolute()
    if not path.exists():
        raise RootNotFound(path)
    if not path.is_dir():
        raise RootNotFound(path, "not a folder")
    return path


async def find_installed(
    root: str | os.PathLike[str],
    *,
    starter: ManifestStarter,
    cache: str | os.PathLike[str] | Literal[False] | None = None,
    refresh: bool = False,
) -> Discovery:
    """Find every cartridge under ``root`` (DSC-1 to DSC-12).

    :param root: a folder of cartridge scripts and executables, an installed tree (version
        folders with a ``cartridge.json``), or one version folder.
    :param cache: the manifest cache folder; ``None``: :func:`default_cache_dir`; ``False``:
        no cache (every candidate is started).
    :param starter: what starts the cache misses to read their manifests (the engine's:
        :func:`cartridge_runtime.engine.discover` and :meth:`Engine.discover
        <cartridge_runtime.engine.Engine.discover>` pass it).
    :param refresh: start every candidate even when the cache holds it (the cache is
        rewritten).
    :raises RootNotFound: ``root`` does not exist or is not a folder.
    """
    root = _checked_root(root)
    candidates, refused = scan(root)
    store = None if cache is False else ManifestCache(Path(cache or default_cache_dir()))
    files = FileDigests(None if store is None else store.folder)
    answers: dict[int, tuple[CacheEntry, str, bool]] = {}
    misses: list[int] = []
    keys: dict[int, str] = {}
    hits = 0
    for index, candidate in enumerate(candidates):
        try:
            keys[index] = cache_key(candidate, files)
        except OSError as exc:
            reason = f"its entry cannot be read: {exc.strerror or exc}"
            refused.append(_refused(candidate, RefusalKind.ENTRY_MISSING, reason))
            continue
        entry = None if store is None or refresh else store.load(keys[index])
        # A remembered failure stands only while what it ran in is unchanged (DSC-13).
        failed = entry is not None and entry.manifest is None
        if failed and entry is not None and entry.stamp != environment_stamp(candidate.command):
            entry = None
        if entry is None:
            misses.append(index)
        else:
            hits += 1
            answers[index] = (entry, keys[index], True)
    spawns = 0
    if misses:
        results, spawns = await starter([candidates[i].command for i in misses])
        for index, result in zip(misses, results, strict=True):
            if isinstance(result, StartFailure):
                stamp = environment_stamp(candidates[index].command)
                entry = CacheEntry(manifest=None, refusal=result.reason, stamp=stamp)
            else:
                entry = CacheEntry(manifest=result)
            if store is not None and not (isinstance(result, StartFailure) and result.transient):
                store.store(keys[index], entry, entry_path=candidates[index].entry)
            answers[index] = (entry, keys[index], False)
    memo_error = files.save()
    if memo_error is not None and store is not None:
        store.errors.append(memo_error)
    found: list[FoundCartridge] = []
    for index in sorted(answers):
        entry, key, hit = answers[index]
        if entry.manifest is not None:
            found.append(_found(candidates[index], entry, key, hit))
        else:
            reason = entry.refusal or "it did not start"
            refused.append(_refused(candidates[index], RefusalKind.HANDSHAKE_FAILED, reason))
    return Discovery(
        root=root,
        found=tuple(sorted(found, key=lambda f: str(f.where))),
        refused=tuple(sorted(refused, key=lambda r: str(r.path))),
        cache_hits=hits,
        spawns=spawns,
        cache_dir=None if store is None else store.folder,
        cache_errors=tuple(store.errors) if store is not None else (),
    )
