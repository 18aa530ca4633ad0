"""The identity probe a switch sends a host that offers caps (RLY-6), sans-IO: its frames,
and what each frame of the host's answer means."""

from __future__ import annotations

import attrs
import cbor2

from ..protocol import IDENTITY_CAP, IDENTITY_STREAM_ID, Frame, FrameType, MessageId, frames
from ._switch_model import Probe

__all__ = ("PROBE_TIMEOUT", "ProbeEnd", "probe_frames", "read_probe_frame")

#: Seconds an identity probe may take before the host is marked unhealthy.
PROBE_TIMEOUT = 10.0

_IGNORED = frozenset(
    {FrameType.STREAM_START, FrameType.STREAM_END, FrameType.LOG, FrameType.CREDIT}
)


@attrs.frozen
class ProbeEnd:
    """The probe is over: passed when ``failure`` is ``None``, else why it failed."""

    failure: str | None = None


def probe_frames(rid: MessageId, xid: MessageId, nonce: bytes) -> tuple[Frame, ...]:
    """The probe: a REQ for the identity cap whose one argument is ``nonce`` (CBOR bytes)."""
    body = cbor2.dumps(nonce)
    sid = IDENTITY_STREAM_ID
    return (
        frames.req(rid, IDENTITY_CAP, xid=xid),
        frames.stream_start(rid, sid, "media:", xid=xid, seq=1),
        frames.chunk(rid, sid, 0, body, xid=xid, seq=2),
        frames.stream_end(rid, sid, 1, xid=xid, seq=3),
        frames.end(rid, xid=xid, response=False, seq=4),
    )


def read_probe_frame(probe: Probe, frame: Frame) -> ProbeEnd | None:
    """Take one frame of the host's answer: ``None`` while the probe goes on (an echoed chunk
    is added to ``probe.echoed``), else how it ended."""
    kind = frame.frame_type
    if kind in _IGNORED:
        return None
    if kind is FrameType.CHUNK:
        try:
            value = cbor2.loads(frame.payload or b"")
        except Exception:  # any undecodable echo fails the probe
            value = None
        if isinstance(value, bytes):
            probe.echoed += value
            return None
        return ProbeEnd("identity probe: the echoed chunk is not a CBOR byte string")
    if kind is FrameType.END:
        if bytes(probe.echoed) == probe.nonce:
            return ProbeEnd()
        return ProbeEnd("identity probe: the echo differs from the nonce sent")
    if kind is FrameType.ERR:
        meta = frame.meta or {}
        return ProbeEnd(f"identity probe failed: [{meta.get('code')}] {meta.get('message')}")
    return ProbeEnd(f"identity probe: unexpected {kind.name}")
