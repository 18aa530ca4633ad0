"""The singleton pools of HELLO come in the reference's order (HSK-24): sorted by the text each
handler was registered under, in code-point order, each keyed by its canonical text. The
built-in adapter-selection cap is registered as ``cap:in="media:";out=...`` and keyed
``cap:out=...``, so it sorts among the ``cap:in=`` caps, where capdag 1.524.58 lists it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from cartridge_runtime.conformance._session import Session
from cartridge_runtime.protocol import Limits, frames
from cartridge_runtime.urn import ADAPTER_SELECTION_CAP, CapUrn

ROOT = Path(__file__).resolve().parents[2]


def _pool_keys(target: Path) -> list[str]:
    session = Session([sys.executable, str(target)])
    try:
        session.send(frames.hello(Limits()))
        hello = session.recv(time.monotonic() + 30)
    finally:
        session.kill()
    assert hello.meta is not None
    return [k for k in json.loads(hello.meta["pools"]) if k != "all"]


@pytest.mark.parametrize("target", ["cartridges/interop.py", "tests/fixtures/capdag_cartridge.py"])
def test_singleton_pools_sort_by_registration_text(target: str) -> None:
    keys = _pool_keys(ROOT / target)
    assert all(str(CapUrn.parse(k)) == k for k in keys)  # keyed by canonical text
    adapter = str(CapUrn.parse(ADAPTER_SELECTION_CAP))
    registered = [ADAPTER_SELECTION_CAP if k == adapter else k for k in keys]
    assert registered == sorted(registered), keys
