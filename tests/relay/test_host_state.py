"""The switch gives a host its opaque resources payload (RELAY_STATE, RLY-4): at once when the
host is attached, and again right after POLICY every time it attaches (RLY-17). Seen from a
host speaking raw frames on the socket."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc
import pytest
from _relay_fakes import notify, record

from cartridge_runtime.engine import Engine
from cartridge_runtime.protocol import Frame, FrameDecoder, FrameType, MessageId, encode_frame
from cartridge_runtime.relay import SwitchCore, ToHost


class RawHost:
    """A host that speaks frames by hand: sends its RELAY_NOTIFY, reads what comes."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def next_frame(self) -> Frame:
        with anyio.fail_after(10):
            while (frame := self.decoder.next_frame()) is None:
                self.decoder.feed(await self.stream.receive())
        return frame


async def _attach_raw(sock: Path) -> RawHost:
    stream = await anyio.connect_unix(sock)
    host = RawHost(stream)
    await stream.send(encode_frame(notify()))  # no caps: healthy at once, no probe
    return host


@pytest.mark.asyncio
async def test_the_state_goes_to_the_host_now_and_after_policy_on_every_attach(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    async with Engine() as engine:
        await engine.listen_for_host(sock, name="h")
        host = await _attach_raw(sock)
        assert (await host.next_frame()).frame_type is FrameType.POLICY
        engine.set_host_state("h", b"resources-1")
        state = await host.next_frame()
        assert state.frame_type is FrameType.RELAY_STATE
        assert state.id == MessageId(0)
        assert bytes(state.payload or b"") == b"resources-1"
        await host.stream.aclose()
        with anyio.fail_after(10):
            while engine.hosts()[0].state.value != "detached":  # noqa: ASYNC110
                await anyio.sleep(0.02)
        engine.set_host_state("h", b"resources-2")  # while it is away: kept
        host = await _attach_raw(sock)  # back in place, same id
        first, second = await host.next_frame(), await host.next_frame()
        assert first.frame_type is FrameType.POLICY
        assert second.frame_type is FrameType.RELAY_STATE
        assert bytes(second.payload or b"") == b"resources-2"
        await host.stream.aclose()


@pytest.mark.asyncio
async def test_the_state_must_be_bytes() -> None:
    async with Engine() as engine:
        with pytest.raises(TypeError, match="bytes"):
            engine.set_host_state("h", "text")  # type: ignore[arg-type]


def test_the_core_keeps_the_state_of_a_host_not_attached_and_sends_it_after_policy() -> None:
    core = SwitchCore()
    assert core.relay_state("h", b"r") == []  # never attached: kept, nothing sent
    actions = core.attach("h", notify(record("c", ["cap:op=x"])), 0.0)
    sent = [a.frame for a in actions if isinstance(a, ToHost)]
    assert isinstance(core.relay_state("h", b"r2")[0], ToHost)
    kinds = [f.frame_type for f in sent]
    assert kinds[:3] == [FrameType.POLICY, FrameType.RELAY_STATE, FrameType.REQ]
    assert bytes(sent[1].payload or b"") == b"r"
