"""Both connection cores speak the same verbs: bytes in (``b""`` is the end), events out, bytes
to send from one place, and one state vocabulary. Two cores paired over memory, the bytes
moved whole and one byte at a time, run the start-up with no IO and no shell."""

from __future__ import annotations

from typing import Any

import pytest

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    NEED_DATA,
    PEER_CLOSED,
    CartridgeConnection,
    ConnPhase,
    ConnState,
    FrameType,
    Handshaken,
    HeartbeatProbe,
    HostConnection,
    Limits,
    MessageId,
    RequestAdmitted,
    StartupPhase,
    StartupProgress,
    frames,
)
from cartridge_runtime.urn._runtime import IDENTITY_CAP


class _Counters:
    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0
        self.late_credits = 0
        self.no_route = 0
        self.protocol_errors = 0
        self.heartbeat_misses = 0


class _Handlers:
    def find_handler(self, cap_urn: str) -> tuple[str, str] | None:
        return (cap_urn, "identity") if cap_urn == IDENTITY_CAP else None

    def is_identity(self, cap_urn: str) -> bool:
        return cap_urn == IDENTITY_CAP

    def pool_name(self, handler_urn: str) -> str:
        return handler_urn


class _Pools:
    def arrive(self, cap: str, item: Any) -> int | None:
        return None

    def release(self, cap: str) -> None:
        pass

    def admit_next(self) -> None:
        return None

    def remove_queued(self, matches: Any) -> None:
        return None

    def apply_desired_json(self, data: bytes | str) -> None:
        pass

    def to_json_bytes(self) -> bytes:
        return b'{"all":{"declared":0,"configured":0,"active":0,"queued":0}}'


def _cores() -> tuple[HostConnection[Any, Any], CartridgeConnection[str]]:
    host: HostConnection[Any, Any] = HostConnection(
        limits=Limits(), policy="full", counters=_Counters()
    )
    cartridge = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(),
        manifest=b'{"name": "paired"}',
        max_open_requests=4,
    )
    return host, cartridge


def _move(data: bytes, into: Any, piece: int) -> list[Any]:
    """Feed ``data`` to a core ``piece`` bytes at a time; every event it makes, in order."""
    events: list[Any] = []
    for at in range(0, len(data), piece):
        into.receive_data(data[at : at + piece])
        while (event := into.next_event()) is not NEED_DATA:
            events.append(event)
    return events


@pytest.mark.parametrize("piece", [1 << 20, 1], ids=["whole", "byte by byte"])
def test_two_cores_run_the_start_up_over_their_verbs(piece: int) -> None:
    host, cartridge = _cores()
    assert [host.state, cartridge.state] == [ConnState.STARTING, ConnState.STARTING]
    for frame in host.start():
        host.send(frame)

    # The host's HELLO: the cartridge answers with its own, queued before anything else.
    (handshaken,) = _move(host.data_to_send(), cartridge, piece)
    assert isinstance(handshaken, Handshaken) and cartridge.state is ConnState.READY

    # The cartridge's HELLO: the host queues the identity request by itself.
    (progress,) = _move(cartridge.data_to_send(), host, piece)
    assert isinstance(progress, StartupProgress) and progress.phase is StartupPhase.IDENTITY
    request = list(progress.frames)
    wire = host.data_to_send()
    assert wire  # the identity request, numbered and encoded by the host core

    # The identity request reaches the cartridge as an admitted request and its body.
    events = _move(wire, cartridge, piece)
    admitted = events[0]
    assert isinstance(admitted, RequestAdmitted) and admitted.request.cap == IDENTITY_CAP

    # The cartridge's handler echoes the nonce (a shell would run it; here the test does).
    rid = request[0].id
    nonce = next(f.payload for f in request if f.frame_type is FrameType.CHUNK)
    assert nonce is not None
    for frame in [
        frames.stream_start(rid, "echo", "media:"),
        frames.chunk(rid, "echo", 0, nonce),
        frames.stream_end(rid, "echo", 1),
        frames.end(rid),
    ]:
        cartridge.send(frame)
    assert _move(cartridge.data_to_send(), host, piece) == [StartupProgress(StartupPhase.MANIFEST)]

    for frame in host.accept_manifest():
        host.send(frame)
    host.started()
    assert host.state is ConnState.READY
    policy = host.data_to_send()
    assert _move(policy, cartridge, piece) == []
    assert cartridge.policy == "full"


def test_the_end_of_input_is_peer_closed_on_both_sides() -> None:
    host, cartridge = _cores()
    cartridge.receive_data(b"")
    assert cartridge.next_event() is PEER_CLOSED
    host.receive_data(b"")
    assert host.next_event() is PEER_CLOSED


def test_a_heartbeat_reaches_the_cartridge_core_as_a_probe_event() -> None:
    host, cartridge = _cores()
    for frame in host.start():
        host.send(frame)
    _move(host.data_to_send(), cartridge, 1 << 20)
    cartridge.data_to_send()
    hid = MessageId.new()
    host.send(frames.heartbeat(hid))
    (probe,) = _move(host.data_to_send(), cartridge, 1)
    assert isinstance(probe, HeartbeatProbe) and probe.hid == hid


def test_one_vocabulary_names_the_states_of_both_sides() -> None:
    assert ConnPhase is ConnState
    assert {s.name for s in ConnState} == {"STARTING", "READY", "CLOSING", "DEAD", "FAILED"}
