"""Ids hash by value on both paths: in C (``_speedups``) when built, by attrs' hash otherwise;
equal ids always hash alike, so dicts keyed by request id find ids made anywhere."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cartridge_runtime.protocol import MessageId, _codec

ROOT = Path(__file__).resolve().parents[2]
BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None

_values = st.one_of(st.binary(min_size=16, max_size=16), st.integers(0, (1 << 64) - 1))


@given(a=_values, b=_values)
def test_equal_ids_hash_alike_and_key_the_same_entry(a: bytes | int, b: bytes | int) -> None:
    x, y = MessageId(a), MessageId(b)
    if x == y:
        assert hash(x) == hash(y)
    table = {x: "x"}
    assert table.get(MessageId(a)) == "x"
    assert (MessageId(b) in table) == (x == y)


def test_a_uuid_id_and_an_int_id_are_different_keys() -> None:
    table = {MessageId(1): "int", MessageId(b"\x00" * 15 + b"\x01"): "uuid"}
    assert table[MessageId(1)] == "int"
    assert table[MessageId(b"\x00" * 15 + b"\x01")] == "uuid"


@pytest.mark.skipif(not BUILT or bool(os.environ.get(_codec.PURE_PYTHON_ENV)), reason="no C")
def test_ids_hash_in_c_when_built_and_by_attrs_when_switched_off() -> None:
    value = b"\x07" * 16
    assert hash(MessageId(value)) == hash(value)  # the compiled hash: the value's own
    check = (
        "from cartridge_runtime.protocol import MessageId; "
        "v = b'\\x07' * 16; "
        "assert hash(MessageId(v)) != hash(v); "
        "assert {MessageId(v): 1}[MessageId(v)] == 1"
    )
    env = dict(os.environ, **{_codec.PURE_PYTHON_ENV: "1"})
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
