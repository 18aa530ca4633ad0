"""The runtime's fast paths: one write per small response, echo pass-through, gathering writes."""

from __future__ import annotations

import os
import threading

import anyio
import anyio.abc
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime._plumbing import FdSendStream
from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    Frame,
    FrameDecoder,
    FrameType,
    MessageId,
    _builders,
    checksum,
    encode_frame,
    frames,
)

_BLOCK = bytes(range(256)) * 256  # 64 KiB: above the coalescing size, below max_chunk


class _Feed(anyio.abc.ByteReceiveStream):
    """Hands out prepared byte blocks, each after the previous answer arrived."""

    def __init__(self, blocks: list[bytes], sink: _Sink) -> None:
        self.blocks = blocks
        self.sink = sink

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.blocks:
            with anyio.fail_after(10):
                await self.sink.terminal.wait()
            raise anyio.EndOfStream
        block = self.blocks.pop(0)
        return block

    async def aclose(self) -> None:
        pass


class _Sink(anyio.abc.ByteSendStream):
    """Records every send call (one per write the runtime makes) and decodes the frames."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.frames: list[Frame] = []
        self.decoder = FrameDecoder()
        self.terminal = anyio.Event()

    async def send(self, item: bytes) -> None:
        self.writes.append(bytes(item))
        self.decoder.feed(bytes(item))
        for f in self.decoder.frames():
            self.frames.append(f)
            if f.frame_type in (FrameType.END, FrameType.ERR) and f.id != MessageId(0):
                self.terminal.set()

    async def aclose(self) -> None:
        pass


def _request(rid: MessageId, cap: str, payloads: list[bytes]) -> bytes:
    out = [frames.req(rid, cap), frames.stream_start(rid, "in", "media:")]
    out += [frames.chunk(rid, "in", i, p) for i, p in enumerate(payloads)]
    out += [frames.stream_end(rid, "in", len(payloads)), frames.end(rid, response=False)]
    return b"".join(encode_frame(f.replace(seq=n)) for n, f in enumerate(out))


async def _serve(request: bytes) -> _Sink:
    sink = _Sink()
    hello = encode_frame(frames.hello(DEFAULT_LIMITS))
    feed = _Feed([hello, encode_frame(frames.policy("offline")), request], sink)
    with anyio.fail_after(20):
        status = await build_runtime().serve(feed, sink)
    assert status == 0
    return sink


@pytest.mark.asyncio
async def test_small_response_leaves_in_one_write() -> None:
    rid = MessageId.new()
    sink = await _serve(_request(rid, ECHO, [b"\x43abc"]))
    response = [f for f in sink.frames if f.id == rid]
    kinds = [f.frame_type for f in response]
    assert kinds == [FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END, FrameType.END]
    assert [f.seq for f in response] == [0, 1, 2, 3]
    # HELLO is written on its own; the whole response is the one write after it.
    assert len(sink.writes) == 2


@pytest.mark.asyncio
async def test_echo_pass_through_sends_the_same_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rid = MessageId.new()
    payloads = [
        b"\x5a" + len(_BLOCK).to_bytes(4, "big") + _BLOCK,
        b"\x59" + (4096).to_bytes(2, "big") + _BLOCK[:4096],
        b"\x43xyz",
    ]
    request = _request(rid, ECHO, payloads)
    computed: list[int] = []  # payload sizes the outgoing side checksums

    def counting(data: bytes) -> int:
        computed.append(len(data))
        return checksum(data)

    monkeypatch.setattr(_builders, "_checksum", counting)
    sink = await _serve(request)
    # The large chunks reuse the verified checksum of the incoming chunk: none recomputed.
    assert all(n < 4096 for n in computed)
    chunks = [f for f in sink.frames if f.id == rid and f.frame_type is FrameType.CHUNK]
    # The two large chunks go back unchanged; the small one is coalesced as usual.
    assert [f.payload for f in chunks] == payloads
    assert [f.chunk_index for f in chunks] == [0, 1, 2]
    assert all(f.checksum == checksum(f.payload or b"") for f in chunks)
    end = [f for f in sink.frames if f.id == rid][-1]
    assert end.frame_type is FrameType.END


@pytest.mark.asyncio
async def test_non_shortest_byte_string_head_is_re_encoded() -> None:
    """A CHUNK whose bstr head is not the shortest form still decodes; the echo answers with
    the encoder's own (shortest) form, exactly as without the pass-through."""
    rid = MessageId.new()
    data = _BLOCK[:5000]
    long_head = b"\x5a" + len(data).to_bytes(4, "big") + data  # 4-byte length where 2 suffice
    sink = await _serve(_request(rid, ECHO, [long_head]))
    chunks = [f for f in sink.frames if f.id == rid and f.frame_type is FrameType.CHUNK]
    assert [f.payload for f in chunks] == [b"\x59" + len(data).to_bytes(2, "big") + data]
    assert chunks[0].checksum == checksum(chunks[0].payload or b"")


@pytest.mark.asyncio
async def test_send_many_survives_partial_writes() -> None:
    """A gathering write into a small pipe is partial many times; every byte arrives in order."""
    r, w = os.pipe()
    parts = [bytes([i % 251]) * (1000 + 37 * i) for i in range(300)]
    expected = b"".join(parts)
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 7000):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    stream = FdSendStream(w)
    try:
        with anyio.fail_after(20):
            await stream.send_many([*parts, b""])
    finally:
        stream.restore()
        os.close(w)
        reader.join(10)
        os.close(r)
    assert bytes(got) == expected


@pytest.mark.asyncio
async def test_a_finished_request_is_freed_without_the_cycle_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reference cycle outlives a request: with the cyclic GC off, the request's state
    (and its input and output streams) is gone as soon as the session is done with it."""
    import gc
    import weakref

    from cartridge_runtime.runtime import _input, _input_package
    from cartridge_runtime.runtime._frames import _wire

    made: list[weakref.ref[object]] = []
    for cls in (_wire.Active, _wire.WireOutput, _input.InputStream, _input_package.InputPackage):
        original = cls.__init__

        def tracking(self: object, *args: object, _orig: object = original, **kw: object) -> None:
            _orig(self, *args, **kw)  # type: ignore[operator]
            made.append(weakref.ref(self))

        monkeypatch.setattr(cls, "__init__", tracking)
    gc.collect()
    gc.disable()
    try:
        sink = await _serve(_request(MessageId.new(), ECHO, [b"\x43abc"]))
        assert sink.terminal.is_set()
        assert len(made) >= 4
        alive = [type(r()).__name__ for r in made if r() is not None]
        assert alive == []
    finally:
        gc.enable()
