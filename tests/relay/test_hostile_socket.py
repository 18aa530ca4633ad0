"""Hostile input on the relay socket, both ways: garbage, truncated and oversized frames,
frames in the wrong direction, random mutations of a valid session. The invariant: the link
closes (or the frame is refused) with only our protocol error, nothing hangs, and the host or
engine goes on serving the next link."""

from __future__ import annotations

import contextlib
import random
import struct
from pathlib import Path

import anyio
import pytest
from _relay_fakes import notify, record

from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen
from cartridge_runtime.protocol import (
    FrameDecoder,
    FrameType,
    Limits,
    MessageId,
    ProtocolError,
    encode_frame,
    frames,
)
from cartridge_runtime.relay import HostState, RelayProtocolError, relay_state

ROOT = Path(__file__).resolve().parents[2]
INTEROP = str(ROOT / "cartridges" / "interop.py")
ECHO = "cap:echo"


def _session() -> bytes:
    """A valid switch-to-host session: POLICY, then one echo request."""
    rid, xid = MessageId.new(), MessageId(1)
    parts = [
        frames.policy("full"),
        frames.req(rid, ECHO, xid=xid),
        frames.stream_start(rid, "a", "media:", xid=xid, seq=1),
        frames.chunk(rid, "a", 0, b"\x43abc", xid=xid, seq=2),
        frames.stream_end(rid, "a", 1, xid=xid, seq=3),
        frames.end(rid, xid=xid, response=False, seq=4),
    ]
    return b"".join(encode_frame(f) for f in parts)


def _hostile() -> list[bytes]:
    rng = random.Random(7)
    session = _session()
    cases = [
        b"\xff" * 64,
        struct.pack(">I", 3) + b"\xff\xff\xff",
        struct.pack(">I", 1 << 30),  # far over any max_frame
        session[: len(session) // 2],  # EOF inside a frame
        encode_frame(frames.hello(Limits())),
        encode_frame(notify()),  # RELAY_NOTIFY toward a host
        b"GET / HTTP/1.1\r\n\r\n",
    ]
    for _ in range(24):
        data = bytearray(session)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cases.append(bytes(data))
    return cases


async def _read_all(stream: anyio.abc.ByteStream, within: float) -> bytes:
    out = bytearray()
    with anyio.move_on_after(within):
        while True:
            try:
                out += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                break
    return bytes(out)


@pytest.mark.asyncio
async def test_hostile_bytes_to_our_host_close_the_link_and_it_serves_the_next(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "h.sock"
    async with Engine() as engine:
        await engine.start(engine.add_cartridge(INTEROP))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            for data in _hostile():
                async with await anyio.connect_unix(sock) as stream:
                    await stream.send(data)
                    await stream.send_eof()
                    reply = await _read_all(stream, 10)
                decoder = FrameDecoder()
                decoder.feed(reply)
                kinds = []
                while (frame := decoder.next_frame()) is not None:
                    kinds.append(frame.frame_type)
                assert kinds[0] is FrameType.RELAY_NOTIFY  # every link starts with it
                assert FrameType.POLICY not in kinds and FrameType.HELLO not in kinds
            # after all that, a well-formed session still gets its echo
            async with await anyio.connect_unix(sock) as stream:
                await stream.send(_session())
                decoder = FrameDecoder()
                with anyio.fail_after(20):
                    while True:
                        decoder.feed(await stream.receive())
                        got = []
                        while (frame := decoder.next_frame()) is not None:
                            got.append(frame)
                        if any(f.frame_type is FrameType.END for f in got):
                            break
            tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_hostile_bytes_from_a_host_detach_it_and_the_switch_goes_on(sock_dir: Path) -> None:
    sock = sock_dir / "s.sock"
    async with Engine() as engine:
        await engine.listen_for_host(sock, name="h")
        good = encode_frame(notify(record("c", ["cap:op=x"])))
        for data in [*_hostile()[:12], good + encode_frame(frames.policy("full"))]:
            async with await anyio.connect_unix(sock) as stream:
                await stream.send(data)
                await stream.send_eof()
                await _read_all(stream, 5)  # the switch closes the link
            with anyio.fail_after(10):
                while engine.hosts() and engine.hosts()[0].state is not HostState.DETACHED:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
        assert all(h.state is HostState.DETACHED for h in engine.hosts())


def test_the_cores_raise_only_relay_protocol_errors_on_mutated_frames() -> None:
    from cartridge_runtime.relay import HostLink, SwitchCore

    rng = random.Random(11)
    base = [
        notify(record("c", [ECHO])),
        frames.policy("offline"),
        relay_state(b"x"),
        frames.req(MessageId.new(), ECHO, xid=MessageId(3)),
    ]
    for _ in range(300):
        frame = rng.choice(base)
        data = bytearray(encode_frame(frame))
        data[rng.randrange(4, len(data))] = rng.randrange(256)
        try:
            mutated = FrameDecoder()
            mutated.feed(bytes(data))
            got = mutated.next_frame()
        except ProtocolError:
            continue
        if got is None:
            continue
        core = SwitchCore()
        with contextlib.suppress(ProtocolError):
            core.attach("h", got, 0.0)
        with contextlib.suppress(RelayProtocolError):
            HostLink().receive(got)
