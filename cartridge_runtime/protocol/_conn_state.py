"""The one vocabulary for where a connection stands, on the host side and the cartridge side.

Each side moves through these states by its own table (the host's
:data:`~._host_conn.CONN_TRANSITIONS`, the cartridge's
:data:`~._cartridge_state.PHASE_TRANSITIONS`); the names mean the same on both sides.
"""

from __future__ import annotations

import enum

__all__ = ("ConnState",)


class ConnState(enum.Enum):
    """The life of one connection."""

    #: Host: launched, the start-up runs. Cartridge: waiting for the host's HELLO (HSK-2).
    STARTING = "starting"
    #: The start-up is done: requests flow (calls may go to the cartridge; it serves them).
    READY = "ready"
    #: Host only: a shutdown was asked; pending calls end as the instance stops.
    CLOSING = "closing"
    #: Over: the instance ended (host), or the connection closed (cartridge).
    DEAD = "dead"
    #: Host only: the start-up failed.
    FAILED = "failed"
