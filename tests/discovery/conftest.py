"""Fixtures of the discovery tests (helpers in ``_discovery_helpers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _discovery_helpers import SpawnLog


@pytest.fixture
def spawn_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SpawnLog]:
    log = tmp_path / "spawns.log"
    monkeypatch.setenv("DISCOVERY_SPAWN_LOG", str(log))
    yield SpawnLog(log)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"
