"""Frame.replace: the same frame as attrs.evolve, fields in wire-key order, on every path."""

from __future__ import annotations

import attrs
import pytest

from cartridge_runtime.protocol import Frame, FrameType, MessageId, encode_frame

CHUNK = Frame(
    frame_type=FrameType.CHUNK,
    id=MessageId(3),
    seq=2,
    stream_id="s1",
    routing_id=MessageId(7),
    payload=b"abc",
)

CHANGES = [
    {"id": MessageId(4)},  # a head field
    {"id": MessageId(5), "routing_id": MessageId(9), "seq": 6},  # fields the frame has
    {"routing_id": None},  # a field removed
    {"stream_id": None, "payload": b"z"},
    {"cap": "cap:x"},  # a field the frame lacks: it goes in its wire-key place
    {"routing_id": None, "checksum": 12},
    {"cap": None},  # removing an absent field changes nothing
    {},
]


@pytest.mark.parametrize("changes", CHANGES)
def test_replace_is_evolve_in_wire_order(changes: dict[str, object]) -> None:
    got = CHUNK.replace(**changes)
    want = attrs.evolve(CHUNK, **changes)
    assert got == want
    assert list(got.__dict__) == list(want.__dict__)  # the order the encoder walks
    assert encode_frame(got) == encode_frame(want)


def test_replace_leaves_the_original_alone() -> None:
    before = dict(CHUNK.__dict__)
    CHUNK.replace(id=MessageId(99), routing_id=None)
    assert CHUNK.__dict__ == before


@pytest.mark.parametrize("changes", [{"bogus": 1}, {"bogus": None}])
def test_replace_refuses_an_unknown_field(changes: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        CHUNK.replace(**changes)
