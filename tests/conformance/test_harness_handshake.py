"""The harness's start-up is the engine's (the shared sans-IO HostHandshake, the manifest
check): a cartridge whose HELLO or identity echo is wrong fails ``async with
CartridgeHarness(...)`` with the typed error, one whose manifest is refused with SpawnFailed."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import pytest

from cartridge_runtime.engine import SpawnFailed
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import (
    FrameDecoder,
    HandshakeError,
    IdentityCheckError,
    Limits,
    VersionMismatchError,
    encode_frame,
    frames,
)
from cartridge_runtime.testing import CartridgeHarness

#: A manifest the engine's start-up accepts (the harness checks it as the engine does).
MANIFEST = Manifest.build(
    name="fake",
    version="0.0.0",
    description="a hand-written HELLO",
    caps=[CapDef.simple("cap:in=media:;op=echo;out=media:", "Echo", aliases="echo")],
).to_json_bytes()


class FakeRuntime:
    """Answers the host's HELLO with a HELLO of ``version``; echoes the nonce ``echo``ed."""

    def __init__(
        self, *, version: int = 6, wrong_echo: bool = False, manifest: bytes = MANIFEST
    ) -> None:
        self.version = version
        self.manifest = manifest
        self.wrong_echo = wrong_echo

    async def serve(
        self, receive: anyio.abc.ByteReceiveStream, send: anyio.abc.ByteSendStream
    ) -> int:
        decoder = FrameDecoder()
        meta: dict[str, Any] = dict(Limits().to_meta())
        meta.update(version=self.version, manifest=self.manifest, pools=b"{}")
        hello = frames.hello(Limits())
        hello = hello.replace(meta=meta)
        sent_hello = False
        while True:
            try:
                data = await receive.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return 0
            decoder.feed(data)
            for f in decoder.frames():
                if not sent_hello:
                    await send.send(encode_frame(hello))
                    sent_hello = True
                elif f.frame_type.name == "CHUNK":
                    payload = b"\x58\x20" + b"x" * 32 if self.wrong_echo else f.payload
                    assert payload is not None
                    out = [
                        frames.stream_start(f.id, "e", "media:"),
                        frames.chunk(f.id, "e", 0, payload),
                        frames.stream_end(f.id, "e", 1),
                        frames.end(f.id),
                    ]
                    await send.send(b"".join(encode_frame(o) for o in out))


@pytest.mark.asyncio
async def test_a_hello_of_another_version_fails_the_harness() -> None:
    with anyio.fail_after(20), pytest.raises(VersionMismatchError):
        async with CartridgeHarness(FakeRuntime(version=5)):
            pass


@pytest.mark.asyncio
async def test_a_wrong_identity_echo_fails_the_harness() -> None:
    with anyio.fail_after(20), pytest.raises(IdentityCheckError):
        async with CartridgeHarness(FakeRuntime(wrong_echo=True)):
            pass


@pytest.mark.asyncio
async def test_a_right_echo_passes() -> None:
    async with CartridgeHarness(FakeRuntime(), policy=None) as h:
        assert h.hello is not None and h.hello.pools == {}
    assert issubclass(IdentityCheckError, HandshakeError)


@pytest.mark.asyncio
async def test_a_manifest_the_engine_refuses_fails_the_harness() -> None:
    with anyio.fail_after(20), pytest.raises(SpawnFailed) as info:
        async with CartridgeHarness(FakeRuntime(manifest=b"{}")):
            pass
    assert "manifest is invalid" in info.value.message
