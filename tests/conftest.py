"""Shared set-up of the whole suite: the folders mirror the package (``tests/engine/`` for
``cartridge_runtime/engine/``...), ``tests/house/`` holds the structure, vocabulary, typing,
README and packaging checks, and the helper modules (``_engine_helpers.py``, vector readers,
generators) live here at the top, importable from every folder (this file's folder is on
``sys.path``)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run in parallel a file at a time (``./scripts/test`` uses pytest-xdist's
    ``--dist loadgroup``): a module's fixtures are built once, on one worker. Every module that
    starts a local Ray instance shares one group, so no two Ray instances run at once (a second
    ``ray.init()`` on the machine would join the first)."""
    for item in items:
        name = item.path.name
        group = "ray" if "ray" in name else str(item.path.relative_to(config.rootpath))
        item.add_marker(pytest.mark.xdist_group(group))
