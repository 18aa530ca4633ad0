"""The agent example's cartridges, loaded from ``examples/agent`` for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

AGENT = Path(__file__).resolve().parents[2] / "examples" / "agent"


def load(name: str) -> ModuleType:
    key = f"agent_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, AGENT / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module
