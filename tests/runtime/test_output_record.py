"""An output's stream made in one C call (``_wire._new_outgoing``) is the stream
``OutgoingStream(...)`` makes for an output, slot for slot, and it makes the same frames."""

from __future__ import annotations

import os

import pytest

from cartridge_runtime.protocol import MessageId, OutgoingStream
from cartridge_runtime.runtime._frames import _wire


def _pair(xid: MessageId | None, is_sequence: bool, output: str | None) -> list[OutgoingStream]:
    rid = MessageId.new()
    plain = OutgoingStream(
        rid,
        "resp-1-0",
        "media:x",
        xid=xid,
        max_chunk=5,
        initial_credit=4,
        is_sequence=is_sequence,
        output=output,
    )
    make = _wire._new_outgoing
    if make is None:
        assert os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON")
        pytest.skip("the compiled maker is switched off: make_output calls the class")
    made = make(
        rid, xid, "resp-1-0", "media:x", 5, 4, is_sequence, False, output, None, True,
        _wire._NEW, 0, bytearray(), 0.0,
    )  # fmt: skip
    return [made, plain]


def _fields(stream: OutgoingStream) -> list[object]:
    return [getattr(stream, name) for name in OutgoingStream.__slots__]


@pytest.mark.parametrize("routed", [False, True])
@pytest.mark.parametrize("is_sequence", [False, True])
@pytest.mark.parametrize("output", [None, "media:out"])
def test_the_stream_is_the_one_the_class_makes(
    routed: bool, is_sequence: bool, output: str | None
) -> None:
    made, plain = _pair(MessageId.new() if routed else None, is_sequence, output)
    assert type(made) is OutgoingStream
    assert _fields(made) == _fields(plain)
    assert made._buf is not plain._buf


def test_the_stream_makes_the_frames_the_class_makes() -> None:
    made, plain = _pair(None, False, None)
    for stream in (made, plain):
        stream.start()
    for step in (
        lambda s: s.write_bytes(b"hello world, twelve"),
        lambda s: s.flush(),
        lambda s: s.close(),
    ):
        a, b = step(made), step(plain)
        assert [repr(f) for f in a] == [repr(f) for f in b]
    assert _fields(made) == _fields(plain)
