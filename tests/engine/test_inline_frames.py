"""A small call's whole request body, queued at open: the direct path for a small byte
value builds exactly the frames of the general one (an OutgoingStream per argument)."""

from __future__ import annotations

from typing import Any

import pytest

from cartridge_runtime import protocol as P
from cartridge_runtime.engine._inputs import inline_frames
from cartridge_runtime.protocol import Frame, FrameType, MessageId, encode_frame

LIMITS = P.Limits(max_frame=1 << 20, max_chunk=64, initial_credit=4)


def general(inputs: list[tuple[str, Any]]) -> list[Frame] | None:
    # A bytearray takes the general path (only exact bytes take the direct one).
    return inline_frames(
        [(m, bytearray(v) if type(v) is bytes else v) for m, v in inputs],
        RID,
        XID,
        LIMITS,
    )


RID = MessageId.new()
XID = MessageId(7)


@pytest.mark.parametrize(
    "inputs",
    [
        [("media:fmt=json;record", b'{"value": 21}')],
        [("media:", b"x"), ("media:enc=utf-8", b"y" * 64)],
        [("media:", b"a" * 65)],  # two chunks: the general path
        [("media:", b"")],  # no chunk: the general path
        [("media:", b"a"), ("media:enc=utf-8;list", [b"i", b"j"]), ("media:", b"z")],
    ],
)
def test_direct_and_general_paths_give_the_same_frames_and_bytes(
    inputs: list[tuple[str, Any]],
) -> None:
    direct = inline_frames(inputs, RID, XID, LIMITS)
    assert direct is not None
    assert direct == general(inputs)
    assert [encode_frame(f) for f in direct] == [encode_frame(f) for f in general(inputs) or []]
    assert direct[-1].frame_type is FrameType.END


def test_a_value_over_the_credit_is_not_inlined() -> None:
    assert inline_frames([("media:", b"a" * 64 * 5)], RID, XID, LIMITS) is None
