"""Reading machine notation against the caps of an engine's cartridges.

:meth:`Engine.machine` resolves a machine (:mod:`cartridge_runtime.machine`) against every cap
the engine's cartridges declare in their manifests. A cartridge that has not started yet is
started to read its manifest (it then stays up, ready for the calls a run will make); no call
is sent. When two cartridges declare one cap URN, the first added defines it, as in routing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from ...machine import FileMachineSource, Machine, MachineSource, parse_machine
from ...manifest import CapDef
from .._errors import EngineError

__all__ = ("ManifestSource", "engine_caps", "read_machine")


class ManifestSource(Protocol):
    """What reading a machine needs of the engine: start a cartridge, read its manifest."""

    async def start(self, name: str) -> None: ...
    def manifest(self, name: str) -> Any: ...


async def engine_caps(engine: ManifestSource, names: Sequence[str]) -> list[CapDef]:
    """Every cap of the cartridges ``names``, in the order added, starting those whose
    manifest is not known yet (neither running nor given to ``add_cartridge``).

    :raises SpawnFailed: a cartridge failed to start (the first of them, in the order added).
    """
    failures: dict[str, BaseException] = {}

    async def start(name: str) -> None:
        try:
            await engine.start(name)
        except EngineError as error:
            failures[name] = error

    async with anyio.create_task_group() as tg:
        for name in names:
            if engine.manifest(name) is None:
                tg.start_soon(start, name)
    for name in names:
        if name in failures:
            raise failures[name]
    caps: list[CapDef] = []
    for name in names:
        manifest = engine.manifest(name)
        if manifest is not None:
            caps.extend(manifest.all_caps())
    return caps


def _read(path: Path) -> tuple[str, str]:
    try:
        origin = os.path.realpath(path, strict=True)
        return origin, Path(origin).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise EngineError(f"machine file {path}: cannot be read ({type(error).__name__})") from None


async def read_machine(
    engine: ManifestSource,
    names: Sequence[str],
    text_or_path: str | os.PathLike[str],
    source: MachineSource | None,
) -> Machine:
    """What :meth:`Engine.machine` does: read the text (or the file), then parse and resolve it
    against the caps of ``names``.

    :raises EngineError: the file cannot be read.
    :raises SpawnFailed: a cartridge failed to start.
    :raises MachineError: the machine is refused.
    """
    origin: str | None = None
    if isinstance(text_or_path, str):
        text = text_or_path
    else:
        real, text = await anyio.to_thread.run_sync(_read, Path(text_or_path))
        origin = real
        if source is None:
            source = FileMachineSource(Path(real).parent)
    caps = await engine_caps(engine, names)
    return parse_machine(text, caps, source=source, origin=origin)
