"""A cartridge refused by discovery is tried again once what it ran in changed: a module it
lacked installed, the variables that choose its packages changed, or a refresh asked for
(DSC-13); an unchanged one stays remembered."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from _discovery_helpers import SpawnLog, write_cartridge

from cartridge_runtime.discovery import RefusalKind
from cartridge_runtime.discovery._cache import environment_stamp
from cartridge_runtime.engine import discover

MODULE = "plans_retry_helper_module"


def _needs_module(root: Path) -> Path:
    """A cartridge that imports a module not installed yet, then is the usual test one."""
    path = write_cartridge(root / "needy.py", "needy", alias="needy-op")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("import os\n", f"import os\nimport {MODULE}  # noqa\n", 1))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.asyncio
async def test_a_module_installed_since_gets_a_refused_cartridge_tried_again(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packages = tmp_path / "packages"
    packages.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(packages))
    root = tmp_path / "root"
    _needs_module(root)
    cold = await discover(root, cache=cache_dir)
    assert [r.kind for r in cold.refused] == [RefusalKind.HANDSHAKE_FAILED]
    assert MODULE in cold.refused[0].reason
    warm = await discover(root, cache=cache_dir)
    assert (warm.spawns, warm.cache_hits) == (0, 1)  # nothing changed: remembered
    (packages / f"{MODULE}.py").write_text("VALUE = 1\n")
    retried = await discover(root, cache=cache_dir)
    assert retried.spawns == 1 and retried.refused == ()
    assert [f.name for f in retried.found] == ["needy"]


@pytest.mark.asyncio
async def test_a_changed_variable_or_a_refresh_gets_it_tried_again(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    _needs_module(root)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    cold = await discover(root, cache=cache_dir)
    assert cold.refused and cold.spawns == 1
    again = await discover(root, cache=cache_dir, refresh=True)
    assert again.spawns == 1 and again.refused
    packages = tmp_path / "elsewhere"
    packages.mkdir()
    (packages / f"{MODULE}.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(packages))
    found = await discover(root, cache=cache_dir)
    assert found.spawns == 1 and [f.name for f in found.found] == ["needy"]


def test_the_stamp_follows_the_interpreter_and_its_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.delenv("PYTHONPATH", raising=False)
    command = (sys.executable, "x.py")
    first = environment_stamp(command)
    assert environment_stamp(command) == first
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert environment_stamp(command) != first
    fake = tmp_path / "bin" / "python9"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    other = environment_stamp((str(fake), "x.py"))
    assert other != environment_stamp(command)
    fake.write_text("#!/bin/sh\nexit 0\n")  # a new interpreter at the same path
    assert environment_stamp((str(fake), "x.py")) != other


@pytest.mark.asyncio
async def test_an_entry_from_before_the_stamp_is_tried_again(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    _needs_module(root)
    await discover(root, cache=cache_dir)
    (entry,) = [p for p in cache_dir.rglob("*.json") if p.parent != cache_dir]  # noqa: ASYNC240
    body = json.loads(entry.read_text())
    assert "stamp" in body and "refusal" in body
    del body["stamp"]
    entry.write_text(json.dumps(body))
    again = await discover(root, cache=cache_dir)
    assert again.spawns == 1
