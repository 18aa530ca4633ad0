"""Helpers for the discovery tests: small cartridge scripts written into a temporary tree, each
appending its name to a spawn log when started (so a test counts the processes that really
ran, not only what discovery reports)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

#: A complete cartridge: one cap (``ALIAS``), and a line in ``$DISCOVERY_SPAWN_LOG`` per start.
CARTRIDGE = '''#!/usr/bin/env python3
"""A cartridge written by the discovery tests."""
import os

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

NAME = {name!r}
VERSION = {version!r}
ALIAS = {alias!r}
URN = 'cap:in="media:enc=utf-8";op=' + ALIAS + ';out="media:enc=utf-8"'

_log = os.environ.get("DISCOVERY_SPAWN_LOG")
if _log:
    with open(_log, "a", encoding="utf-8") as handle:
        handle.write(NAME + "\\n")


class Echo(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        data = await wet.request.take_input().require_stream("media:enc=utf-8")
        await wet.request.output().write(data)


MANIFEST = Manifest.build(
    name=NAME,
    version=VERSION,
    description="written by a test",
    caps=[
        CapDef(
            urn=URN,
            title=ALIAS,
            aliases=(ALIAS,),
            args=[ArgDef.stdin("media:enc=utf-8", name="input", description="text")],
            outputs=[OutputDef(media_urn="media:enc=utf-8", name="output", output_description="text")],
        )
    ],
)

if __name__ == "__main__":
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(URN, Echo)
    runtime.run()
'''

#: A script that looks like a cartridge to the scan but never says HELLO.
BROKEN = '''#!/usr/bin/env python3
"""Marked as a cartridge (CartridgeRuntime) but it fails before its HELLO."""
import sys

if __name__ == "__main__":
    sys.stderr.write("this cartridge is broken on purpose\\n")
    sys.exit(3)
'''


def write_cartridge(
    path: Path, name: str, *, version: str = "1.0.0", alias: str = "shout", executable: bool = True
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CARTRIDGE.format(name=name, version=version, alias=alias), encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_version(
    version_dir: Path,
    name: str,
    version: str,
    *,
    alias: str = "shout",
    record: Mapping[str, object] | None = None,
) -> Path:
    """A version folder: ``main.py`` and its ``cartridge.json`` (fields overridable)."""
    write_cartridge(version_dir / "main.py", name, version=version, alias=alias)
    body: dict[str, object] = {
        "name": name,
        "version": version,
        "channel": "release",
        "registry_url": None,
        "entry": "main.py",
        "installed_at": "2026-12-01T10:00:00Z",
        "installed_from": "dev",
    }
    body.update(record or {})
    (version_dir / "cartridge.json").write_text(json.dumps(body), encoding="utf-8")
    return version_dir


class SpawnLog:
    """The names the test cartridges wrote when started, read fresh each time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def names(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_text(encoding="utf-8").split()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def spawn_env(log: Path) -> dict[str, str]:
    """The environment of a ``cartridge list`` subprocess: this one's, with the spawn log."""
    return {**os.environ, "DISCOVERY_SPAWN_LOG": str(log)}


#: A script marked as a cartridge (CartridgeRuntime) that never answers HELLO.
SILENT = '''#!/usr/bin/env python3
"""Marked as a cartridge (CartridgeRuntime) but it never says HELLO."""
import time

if __name__ == "__main__":
    time.sleep(60)
'''
