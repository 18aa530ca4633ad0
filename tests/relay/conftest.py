"""Fixtures of the relay tests: an owner-only folder for sockets (short, for AF_UNIX)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A fresh owner-only folder with a short path (Unix socket paths are limited)."""
    folder = Path(tempfile.mkdtemp(prefix="rly-", dir="/tmp"))
    os.chmod(folder, 0o700)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
