"""HELLO negotiation and the identity check, for both sides (HSK-*).

Sans-IO: functions take frames and return frames or values; the caller does the IO and the
timing.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import cbor2

from . import _builders as build
from ._checksum import checksum
from ._constants import (
    IDENTITY_CAP,
    IDENTITY_NONCE_LEN,
    IDENTITY_STREAM_ID,
    PROTOCOL_VERSION,
    FrameType,
)
from ._errors import HandshakeError, IdentityCheckError, VersionMismatchError
from ._frame import Frame, MessageId
from ._limits import Limits


def _hello_meta(frame: Frame, who: str) -> dict[str, Any]:
    if frame.frame_type is not FrameType.HELLO:
        raise HandshakeError(f"expected HELLO from the {who} first, got {frame.frame_type.name}")
    meta = dict(frame.meta or {})
    version = meta.get("version")
    if version != PROTOCOL_VERSION or type(version) is not int:
        raise VersionMismatchError(
            f"{who} HELLO announces protocol version {version!r}; only {PROTOCOL_VERSION} is spoken"
        )
    return meta


def accept_host_hello(frame: Frame, ours: Limits) -> Limits:
    """Cartridge side: check the host's HELLO and return the negotiated limits.

    :raises VersionMismatchError: ``meta.version`` is not 6.
    :raises HandshakeError: not a HELLO, or a limit is missing or not positive.
    """
    meta = _hello_meta(frame, "host")
    return ours.negotiate(Limits.from_meta(meta))


@attrs.frozen(kw_only=True)
class CartridgeHello:
    """What the host learns from a cartridge's HELLO."""

    limits: Limits
    manifest: bytes
    pools: dict[str, Any]


def accept_cartridge_hello(frame: Frame, ours: Limits) -> CartridgeHello:
    """Host side: check a cartridge's HELLO (version, limits, manifest, pools).

    :raises HandshakeError: anything required is missing or malformed.
    """
    meta = _hello_meta(frame, "cartridge")
    limits = ours.negotiate(Limits.from_meta(meta))
    manifest = meta.get("manifest")
    if type(manifest) is not bytes:
        raise HandshakeError("cartridge HELLO has no manifest byte string")
    raw_pools = meta.get("pools")
    if type(raw_pools) is not bytes:
        raise HandshakeError("cartridge HELLO has no pools byte string")
    try:
        pools = json.loads(raw_pools)
    except ValueError as exc:
        raise HandshakeError(f"cartridge HELLO pools is not JSON: {exc}") from exc
    if not isinstance(pools, dict):
        raise HandshakeError("cartridge HELLO pools must be a JSON object")
    return CartridgeHello(limits=limits, manifest=manifest, pools=pools)


class IdentityCheck:
    """Host side of the identity check (HSK-6..HSK-8).

    :meth:`frames` gives the five frames to send (all seq 0, no xid). Feed every frame that
    comes back for the check's request id to :meth:`receive`; it returns ``True`` once the
    echo is complete and correct, ``False`` while more is needed, and raises
    :class:`IdentityCheckError` on a wrong echo. Frames of other types are skipped, as the
    reference host does.
    """

    def __init__(self, nonce: bytes | None = None, rid: MessageId | None = None) -> None:
        self.nonce = nonce if nonce is not None else os.urandom(IDENTITY_NONCE_LEN)
        self.rid = rid if rid is not None else MessageId.new()
        self._received = bytearray()
        self._started = False
        self._ended = False

    def frames(self, *, split_at: int | None = None) -> list[Frame]:
        """The request frames. ``split_at`` sends the nonce as two scalar chunks (a stricter probe)."""
        rid = self.rid
        if split_at is None:
            payloads = [cbor2.dumps(self.nonce)]
        else:
            payloads = [cbor2.dumps(self.nonce[:split_at]), cbor2.dumps(self.nonce[split_at:])]
        out = [
            build.req(rid, IDENTITY_CAP),
            build.stream_start(rid, IDENTITY_STREAM_ID, "media:"),
        ]
        out += [build.chunk(rid, IDENTITY_STREAM_ID, i, p) for i, p in enumerate(payloads)]
        out += [
            build.stream_end(rid, IDENTITY_STREAM_ID, len(payloads)),
            build.end(rid, response=False),
        ]
        return out

    def receive(self, frame: Frame) -> bool:
        """Judge one response frame.

        :raises IdentityCheckError: the echo is wrong or the cartridge answered ERR.
        """
        ft = frame.frame_type
        if frame.id != self.rid:
            return False
        if ft is FrameType.STREAM_START:
            self._started = True
        elif ft is FrameType.CHUNK:
            if frame.checksum != checksum(frame.payload or b""):
                raise IdentityCheckError("identity echo chunk has a wrong checksum")
            try:
                value = cbor2.loads(frame.payload or b"")
            except Exception as exc:
                raise IdentityCheckError(
                    f"identity echo chunk is not one CBOR item: {exc}"
                ) from exc
            if type(value) is not bytes:
                raise IdentityCheckError(
                    f"identity echo chunk decodes to {type(value).__name__}, not bytes"
                )
            self._received += value
        elif ft is FrameType.STREAM_END:
            self._ended = True
        elif ft is FrameType.END:
            if not (self._started and self._ended):
                raise IdentityCheckError(
                    "identity echo ended before its stream was started and ended"
                )
            if bytes(self._received) != self.nonce:
                raise IdentityCheckError("identity echo does not match the nonce")
            return True
        elif ft is FrameType.ERR:
            meta = frame.meta or {}
            raise IdentityCheckError(
                f"identity check answered with ERR {meta.get('code')}: {meta.get('message')}"
            )
        return False
