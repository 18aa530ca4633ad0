"""The response path's in-place steps: frames queued with no coroutine when nothing waits,
a small stream's last CHUNK and STREAM_END built together, a value already here collected
in place; each must behave exactly as the general path it shortcuts."""

from __future__ import annotations

from collections.abc import Awaitable

import anyio
import cbor2
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.protocol import (
    COALESCE_BYTES,
    FrameType,
    Limits,
    MessageId,
    OutgoingStream,
    checksum,
)
from cartridge_runtime.runtime._context import REQUEST_KEY, WetContext
from cartridge_runtime.runtime._errors import InputStreamError
from cartridge_runtime.runtime._input import InputStream, StreamFeed
from cartridge_runtime.runtime._input_package import InputPackage
from cartridge_runtime.runtime._peer import PeerInvoker
from cartridge_runtime.runtime._request import Request
from cartridge_runtime.testing import CallResult, CartridgeHarness


def _response_chunks(result: CallResult) -> list[tuple[int | None, bytes | None]]:
    return [(f.chunk_index, f.payload) for f in result.frames if f.frame_type is FrameType.CHUNK]


@pytest.mark.asyncio
async def test_small_response_is_start_chunk_end_then_end() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(ECHO, [("media:", b"hello")])
    kinds = [f.frame_type for f in r.frames]
    assert kinds == [
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.END,
    ]
    chunk, end = r.frames[1], r.frames[2]
    assert chunk.payload == cbor2.dumps(b"hello")
    assert chunk.checksum == checksum(chunk.payload) and chunk.chunk_index == 0
    assert end.chunk_count == 1
    assert r.main_bytes == b"hello"


@pytest.mark.asyncio
async def test_output_without_credit_waits_for_it_and_keeps_order() -> None:
    # One credit: the first CHUNK goes out in place, every later one waits for a CREDIT.
    data = bytes(range(256)) * ((3 * COALESCE_BYTES) // 256 + 1)
    async with CartridgeHarness(
        build_runtime(), limits=Limits(initial_credit=1, max_chunk=1024)
    ) as h:
        with anyio.fail_after(10):
            r = await h.call(ECHO, [("media:", data)])
    assert r.ok and r.main_bytes == data
    chunks = _response_chunks(r)
    assert [i for i, _ in chunks] == list(range(len(chunks))) and len(chunks) > 1
    assert r.frames[-2].frame_type is FrameType.STREAM_END
    assert r.frames[-2].chunk_count == len(chunks)


def _scalar_stream() -> OutgoingStream:
    return OutgoingStream(
        MessageId(7), "s", "media:", xid=MessageId(9), max_chunk=64, initial_credit=4
    )


@pytest.mark.parametrize("size", [1, 23, 24, 64])
def test_close_of_buffered_bytes_matches_flush_then_close(size: int) -> None:
    data = bytes(range(size))
    fused, general = _scalar_stream(), _scalar_stream()
    for og in (fused, general):
        og.start()
        assert og.write_bytes(data) == []  # coalesced
    together = fused.close()
    apart = general.flush() + general.close()
    assert together == apart
    assert together[0].checksum == checksum(together[0].payload)
    assert together[1].chunk_count == 1 and fused.closed and fused.chunks_sent == 1


def test_close_of_unbounded_buffered_bytes_has_no_count() -> None:
    og = _scalar_stream()
    og.start(unbounded=True)
    og.write_bytes(b"abc")
    chunk, end = og.close()
    assert chunk.payload == cbor2.dumps(b"abc")
    assert end.frame_type is FrameType.STREAM_END and end.chunk_count is None


class _Hooks:
    """A ``consumed`` hook that returns an awaitable on every second call."""

    def __init__(self) -> None:
        self.calls = 0
        self.awaited = 0

    def consumed(self, stream_id: str) -> Awaitable[None] | None:
        self.calls += 1
        return self._later() if self.calls % 2 == 0 else None

    async def _later(self) -> None:
        self.awaited += 1


@pytest.mark.asyncio
async def test_collect_values_already_here_returns_credit_and_wire_form() -> None:
    hooks = _Hooks()
    slot: list[object] = [None]
    stream = InputStream("a", "media:", consumed=hooks.consumed, wire_slot=slot)
    feed = StreamFeed(stream)
    feed.push_data(b"one")
    feed.push_data(b"two", (b"\x43two", 1234))
    feed.push_data("three")
    feed.push_end()
    assert await stream.collect_bytes() == b"onetwothree"
    assert hooks.calls == 3 and hooks.awaited == 1
    assert slot[0] == (b"two", b"\x43two", 1234)
    assert await stream.collect_bytes() == b""  # at its end


@pytest.mark.asyncio
async def test_collect_waits_for_values_not_here_yet() -> None:
    stream = InputStream("a", "media:")
    feed = StreamFeed(stream)
    feed.push_data(b"early ")

    async def later() -> None:
        await anyio.sleep(0.01)
        feed.push_data(b"late")
        feed.push_end()

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        with anyio.fail_after(5):
            assert await stream.collect_bytes() == b"early late"


@pytest.mark.asyncio
async def test_collect_raises_a_queued_error_after_the_values_before_it() -> None:
    stream = InputStream("a", "media:")
    feed = StreamFeed(stream)
    feed.push_data(b"x")
    feed.push_error(ValueError("broken"))
    with pytest.raises(InputStreamError):
        await stream.collect_bytes()
    with pytest.raises(InputStreamError):  # and stays broken
        await stream.collect_bytes()


def test_collect_on_trio() -> None:
    async def main() -> bytes:
        stream = InputStream("a", "media:", consumed=_Hooks().consumed)
        feed = StreamFeed(stream)
        feed.push_data(b"a")
        feed.push_data(b"b")
        feed.push_end()
        return await stream.collect_bytes()

    assert anyio.run(main, backend="trio") == b"ab"


def _request(**kwargs: object) -> Request:
    return Request(
        cap_urn=ECHO,
        input_package=InputPackage(),
        outputs=[],
        reporter=None,  # type: ignore[arg-type]  # never used here
        network=None,  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def test_peer_invoker_is_made_at_the_first_peer_call_only() -> None:
    made: list[PeerInvoker] = []

    def factory() -> PeerInvoker:
        made.append(PeerInvoker(None, None))  # type: ignore[arg-type]  # never called here
        return made[-1]

    req = _request(peer_factory=factory)
    assert made == []
    first = req.peer()
    assert req.peer() is first and made == [first]
    with pytest.raises(RuntimeError, match="peer calls are not available"):
        _request().peer()


def test_wet_context_request_reads_own_entries_then_shared_ones() -> None:
    own, shared = _request(), _request()
    assert WetContext({REQUEST_KEY.name: own}, shared={REQUEST_KEY.name: shared}).request is own
    assert WetContext(shared={REQUEST_KEY.name: shared}).request is shared
    with pytest.raises(KeyError, match="WetContext has no 'request'"):
        _ = WetContext().request
