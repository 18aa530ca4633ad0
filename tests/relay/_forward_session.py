"""A raw switch against a cartridge host (an engine serving ``cartridges/interop.py``): four
echo requests, their answers printed frame by frame as hex, for test_host_forwarding.py to
compare between the compiled forwarding and the pure-Python path.

Usage: ``python _forward_session.py SOCKET`` (its folder must exist, owner-only).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import anyio

from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen
from cartridge_runtime.protocol import (
    Frame,
    FrameType,
    MessageId,
    decode_frame,
    encode_frame,
    frames,
)
from cartridge_runtime.relay import forwarding_compiled

INTEROP = str(Path(__file__).resolve().parents[2] / "cartridges" / "interop.py")


def _request(n: int, payload: bytes, chunk_xid: bool = True) -> tuple[MessageId, list[Frame]]:
    rid, xid = MessageId(bytes([n]) * 16), MessageId(n)
    return rid, [
        frames.req(rid, "cap:echo", xid=xid),
        frames.stream_start(rid, "a", "media:", xid=xid, seq=1),
        frames.chunk(rid, "a", 0, payload, xid=xid if chunk_xid else None, seq=2),
        frames.stream_end(rid, "a", 1, xid=xid, seq=3),
        frames.end(rid, xid=xid, response=False, seq=4),
    ]


async def _answer(stream: anyio.abc.ByteStream, buf: bytearray, rid: MessageId) -> list[str]:
    """The raw frames for ``rid`` up to its END, as hex (other frames are skipped)."""
    got: list[str] = []
    while True:
        while len(buf) >= 4:
            n = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + n:
                break
            raw, buf[:] = bytes(buf[: 4 + n]), buf[4 + n :]
            frame = decode_frame(raw)
            if frame.id != rid:
                continue
            # the cartridge names its streams at random: masked, every other byte kept
            sid = (frame.stream_id or "").encode()
            got.append(raw.hex().replace(sid.hex(), "_" * len(sid) * 2) if sid else raw.hex())
            if frame.frame_type in (FrameType.END, FrameType.ERR):
                return got
        buf += await stream.receive()


async def main(sock: str) -> None:
    print(f"compiled {forwarding_compiled()}")
    async with Engine() as engine:
        await engine.start(engine.add_cartridge(INTEROP))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            async with await anyio.connect_unix(sock) as stream:
                await stream.send(encode_frame(frames.policy("full")))
                buf = bytearray()
                with anyio.fail_after(60):
                    # one write for the whole request; then a large CHUNK (Python's path);
                    # then the body in a write of its own after the REQ; then a CHUNK that
                    # lacks its routing id (Python's path: the host gives it one)
                    for n, payload, split, chunk_xid in (
                        (1, b"\x43abc", False, True),
                        (2, b"\x59\x30\x00" + b"L" * 12288, False, True),
                        (3, b"\x43xyz", True, True),
                        (4, b"\x43uvw", False, False),
                    ):
                        rid, parts = _request(n, payload, chunk_xid)
                        wire = [encode_frame(f) for f in parts]
                        if split:
                            await stream.send(wire[0])
                            await anyio.sleep(0.2)
                            await stream.send(b"".join(wire[1:]))
                        else:
                            await stream.send(b"".join(wire))
                        for raw in await _answer(stream, buf, rid):
                            print(raw)
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
