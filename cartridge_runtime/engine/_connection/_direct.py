"""One cartridge connection outside any :class:`~cartridge_runtime.engine.Engine`.

Test tools (the in-process :class:`~cartridge_runtime.testing.CartridgeHarness`) drive one
instance through the engine's own connection: its start-up, reader, writer, routing by
request id and answers to heartbeats, while they choose every request's id and routing id
and send frames or raw bytes as they are. :func:`direct_connection` makes such a connection;
what it returns is typed by :class:`DirectConnection`, the few operations such a tool needs,
so the connection's internals stay free to change.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio

from ...protocol import CartridgeHello, Frame, HostCounters, Limits, MessageId
from .._config import EngineConfig
from .._errors import SpawnFailed
from .._placements._seam import LaunchSpec, Placement
from ._counters import Counters
from ._links import Flow, PeerOrigin
from ._shell import Connection

__all__ = ("DirectConnection", "direct_connection")


class DirectConnection(Protocol):
    """One cartridge connection driven by its caller (see the module docstring)."""

    @property
    def name(self) -> str:
        """The cartridge's name (in the frame tap's calls and in messages)."""
        ...

    @property
    def limits(self) -> Limits:
        """The negotiated limits (the host's own before the cartridge's HELLO)."""
        ...

    @property
    def hello(self) -> CartridgeHello | None:
        """The cartridge's HELLO, once it came."""
        ...

    @property
    def started(self) -> anyio.Event:
        """Set once the start-up succeeded or failed (:attr:`startup_error`)."""
        ...

    @property
    def startup_error(self) -> SpawnFailed | None:
        """Why the start-up failed (its ``__cause__`` the protocol error, if any)."""
        ...

    @property
    def dead(self) -> anyio.Event:
        """Set once the instance ended (or never started)."""
        ...

    @property
    def returncode(self) -> int | None:
        """The instance's exit status, once it ended."""
        ...

    @property
    def counters(self) -> HostCounters:
        """Frames the routing dropped or found late (stragglers, no route...)."""
        ...

    @property
    def in_flight(self) -> int:
        """Requests of the caller still routed to their flow."""
        ...

    async def run(self) -> None:
        """Launch, start up, then serve until death or shutdown (a task body; never raises)."""
        ...

    async def close(self, grace: float) -> None:
        """Shut down: close the input, give the instance ``grace`` seconds, then kill."""
        ...

    async def close_input(self) -> None:
        """Write what is queued, then EOF on the cartridge's input (its end is a shutdown)."""
        ...

    def send_raw(self, data: bytes) -> None:
        """Queue ``data`` as it is, in order with every frame around it."""
        ...

    def expect_reply(self, hid: MessageId, meta: Mapping[str, Any] | None) -> None:
        """The caller sends a HEARTBEAT ``hid`` itself: the cartridge's reply to it is a
        probe's reply, never a heartbeat to answer (HST-13)."""
        ...

    async def ask(
        self, meta: Mapping[str, Any] | None, within: float, hid: MessageId | None = None
    ) -> Frame | None:
        """Probe with a HEARTBEAT and wait up to ``within`` seconds for its reply."""
        ...

    def add_flow(self, rid: MessageId, flow: Flow) -> None:
        """Route the response frames of request ``rid`` to ``flow``."""
        ...

    def add_origin(self, rid: MessageId, origin: PeerOrigin) -> None:
        """Route the frames of the cartridge's peer call ``rid`` to ``origin``."""
        ...

    def forget(self, rid: MessageId) -> None:
        """The flow of ``rid`` ended: later frames for it are counted as stragglers."""
        ...


class _Direct:
    """A :class:`DirectConnection` over an engine :class:`Connection` (by composition)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.name = conn.name
        self.started = conn.started
        self.dead = conn.dead
        self.counters: HostCounters = conn.counters
        self.run = conn.run
        self.close = conn.close
        self.send_raw = conn.send_raw
        self.ask = conn.ask
        self.add_flow = conn.add_flow
        self.add_origin = conn.add_origin
        self.forget = conn.forget

    @property
    def limits(self) -> Limits:
        return self._conn.limits

    @property
    def hello(self) -> CartridgeHello | None:
        return self._conn.core.handshake.hello

    @property
    def startup_error(self) -> SpawnFailed | None:
        return self._conn.startup_error

    @property
    def returncode(self) -> int | None:
        return self._conn.returncode

    @property
    def in_flight(self) -> int:
        return self._conn.in_flight

    async def close_input(self) -> None:
        conn = self._conn
        conn.core.begin_close()
        with contextlib.suppress(Exception):
            await conn.drain()
        if conn.process is not None:
            conn.process.stdin.close()

    def expect_reply(self, hid: MessageId, meta: Mapping[str, Any] | None) -> None:
        self._conn.core.probe(meta, hid)  # the HEARTBEAT it makes is the caller's twin


def direct_connection(
    placement: Placement,
    *,
    name: str,
    config: EngineConfig,
    on_peer_request: Callable[[Frame], None],
    log_path: Path | None = None,
) -> DirectConnection:
    """A connection to one instance of ``name`` on ``placement``, not started yet: run its
    :meth:`~DirectConnection.run` in a task group.

    :param config: its limits, POLICY, timeouts, heartbeats and frame tap.
    :param on_peer_request: told of each REQ the cartridge sends (a peer call); route its
        frames with :meth:`~DirectConnection.add_origin`.
    :param log_path: where the instance's stderr goes (default ``NAME.stderr.log`` in the
        temporary directory; an in-process instance has none).
    :raises CartridgeNotFound: ``placement`` finds no cartridge ``name``.
    """
    spec = LaunchSpec(name=name, replica=0, target=placement.resolve(name))
    conn = Connection(
        placement=placement,
        spec=spec,
        config=config,
        counters=Counters(),
        log_path=log_path or Path(tempfile.gettempdir()) / f"{name}.stderr.log",
        on_peer_request=lambda _conn, req: on_peer_request(req),
        on_dead=lambda _conn: None,
    )
    return _Direct(conn)
