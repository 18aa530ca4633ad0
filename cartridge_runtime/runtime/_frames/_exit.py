"""The exit statuses of CBOR mode, in one place, and which ending of a connection gives which.

Every non-zero exit prints one ``cartridge: ...`` line to stderr first.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from cartridge_runtime.protocol import CloseReason


class ExitStatus(enum.IntEnum):
    """How a cartridge process in CBOR mode ends."""

    OK = 0  #: stdin reached EOF (or the host went away)
    FAILURE = 1  #: a setup or handshake failure, or a relay frame reached the cartridge
    PROTOCOL = 65  #: the byte stream cannot be trusted any more (EX_DATAERR)
    FORCE_KILLED = 137  #: a CANCEL with force_kill ended the process


EXIT_OK = ExitStatus.OK
EXIT_FAILURE = ExitStatus.FAILURE
EXIT_PROTOCOL = ExitStatus.PROTOCOL
EXIT_FORCE_KILLED = ExitStatus.FORCE_KILLED

#: The exit status for each way a connection ends.
EXIT_FOR: Mapping[CloseReason, ExitStatus] = {
    CloseReason.END_OF_INPUT: ExitStatus.OK,
    CloseReason.HANDSHAKE_FAILED: ExitStatus.FAILURE,
    CloseReason.RELAY_FRAME: ExitStatus.FAILURE,
    CloseReason.BROKEN_STREAM: ExitStatus.PROTOCOL,
    CloseReason.FORCE_KILLED: ExitStatus.FORCE_KILLED,
}
