"""Hand-built frames for the codec and handshake tests: any CBOR value, length-prefixed with
plain cbor2, so a test can write maps our own encoder would refuse to produce."""

from __future__ import annotations

from typing import Any

import cbor2
import pytest

from cartridge_runtime.protocol import Frame, FrameDecodeError, MessageId, decode_frame

RID = MessageId(bytes(range(16)))
RID_HEX = bytes(range(16))

ERR_META = {"code": "X", "attribution_class": "input", "message": "m"}
LOG_META = {"level": "info", "attribution_class": "internal", "message": "m"}


def wire(m: Any) -> bytes:
    """A length-prefixed frame around any CBOR value."""
    body = cbor2.dumps(m)
    return len(body).to_bytes(4, "big") + body


def base(ft: int, **extra: Any) -> dict[Any, Any]:
    """The map of a v6 frame of type ``ft`` with id RID and seq 0; ``kN=value`` adds key N."""
    m: dict[Any, Any] = {0: 6, 1: ft, 2: RID_HEX, 3: 0}
    for k, v in extra.items():
        m[int(k[1:])] = v
    return m


def rejects(m: Any, match: str | None = None) -> FrameDecodeError:
    with pytest.raises(FrameDecodeError, match=match) as ei:
        decode_frame(wire(m))
    return ei.value


def accepts(m: Any) -> Frame:
    return decode_frame(wire(m))
