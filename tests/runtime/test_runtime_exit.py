"""Exit statuses of CBOR mode: one table from every way a connection ends."""

from __future__ import annotations

from cartridge_runtime import runtime
from cartridge_runtime.protocol import CloseReason
from cartridge_runtime.runtime._frames._exit import EXIT_FOR, ExitStatus


def test_every_way_a_connection_ends_has_an_exit_status() -> None:
    assert set(EXIT_FOR) == set(CloseReason)
    assert EXIT_FOR[CloseReason.END_OF_INPUT] == 0
    assert EXIT_FOR[CloseReason.HANDSHAKE_FAILED] == EXIT_FOR[CloseReason.RELAY_FRAME] == 1
    assert EXIT_FOR[CloseReason.BROKEN_STREAM] == 65
    assert EXIT_FOR[CloseReason.FORCE_KILLED] == 137


def test_the_public_names_are_the_enum_members() -> None:
    assert runtime.EXIT_OK is ExitStatus.OK
    assert runtime.EXIT_FAILURE is ExitStatus.FAILURE
    assert runtime.EXIT_PROTOCOL is ExitStatus.PROTOCOL
    assert runtime.EXIT_FORCE_KILLED is ExitStatus.FORCE_KILLED
    assert runtime.ExitStatus is ExitStatus
