"""Starting replicas, and the connection a request goes to.

The engine owns one :class:`ReplicaStarter`. While the engine runs (:meth:`ReplicaStarter.run_in`
gave it the engine's task group and log directory) it starts a replica's connection under the
replica's lock (once: concurrent callers wait for the same start-up), remembers a start-up
failure until ``EngineConfig.spawn_retry_after`` passes, and counts respawns.

:meth:`ReplicaStarter.connection` is the choice routing makes for each call and peer call: a
cartridge's only replica (started if needed), or else its least-loaded ready replica, while
every replica that is not running (never started, stopped, or dead) is started in the
background; so a replica that died comes back with the calls after its death, and only the
first calls of a cold cartridge wait for a start-up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.abc

from ..protocol import ConnState, Frame
from ._config import EngineConfig
from ._connection._counters import Counters
from ._connection._shell import Connection
from ._errors import CallError, EngineClosed, SpawnFailed
from ._placements._seam import LaunchSpec
from ._replicas import CartridgeSlot, Replica
from ._supervision._errors import CartridgeRetired
from ._supervision._watchdog import Watchdog

__all__ = ("ReplicaStarter",)

#: What to do on one replica (start it, restart it); its connection, or a :class:`CallError`.
ReplicaAction = Callable[[CartridgeSlot, Replica], Awaitable[Connection]]


class ReplicaStarter:
    """Starts the engine's replicas (see the module docstring).

    :param on_peer_request: given to every connection, for the peer REQs its cartridge sends.
    :param on_started: called after each start-up, whatever its outcome (the caps known may
        have changed).
    :param watchdog: told of every instance that starts, fails to start, and ends.
    """

    def __init__(
        self,
        *,
        config: EngineConfig,
        counters: Counters,
        on_peer_request: Callable[[Connection, Frame], None],
        on_started: Callable[[], None],
        watchdog: Watchdog,
    ) -> None:
        self._watchdog = watchdog
        self._config = config
        self._counters = counters
        self._on_peer_request = on_peer_request
        self._on_started = on_started
        self._tg: anyio.abc.TaskGroup | None = None
        self._log_dir: Path | None = None
        self._closed = False

    def run_in(self, task_group: anyio.abc.TaskGroup | None, log_dir: Path | None) -> None:
        """Start connections in ``task_group`` (``None``: the engine stopped running)."""
        self._tg = task_group
        self._log_dir = log_dir

    def close(self) -> None:
        """Start nothing more: the engine is shutting down."""
        self._closed = True

    def start_soon(self, slot: CartridgeSlot, replica: Replica) -> None:
        """Start ``replica`` in the background (a failure is kept for the next call)."""
        if self._tg is not None and not self._closed:
            self._tg.start_soon(self._start_quietly, slot, replica)

    async def each(self, slot: CartridgeSlot, action: ReplicaAction) -> None:
        """Run ``action`` on every replica of ``slot`` at once.

        :raises CallError: the failure of the first replica (in order) that failed.
        """
        if len(slot.replicas) == 1:
            await action(slot, slot.replicas[0])
            return
        failures: dict[int, CallError] = {}

        async def one(replica: Replica) -> None:
            try:
                await action(slot, replica)
            except CallError as exc:
                failures[replica.index] = exc

        async with anyio.create_task_group() as tg:
            for replica in slot.replicas:
                tg.start_soon(one, replica)
        if failures:
            raise failures[min(failures)]

    async def _start_quietly(self, slot: CartridgeSlot, replica: Replica) -> None:
        with contextlib.suppress(CallError):
            await self.ensure_started(slot, replica)

    async def connection(self, slot: CartridgeSlot) -> Connection:
        """A ready connection of ``slot`` for one more request (see the module docstring).

        :raises SpawnFailed: no replica is ready and the one waited for cannot start.
        :raises EngineClosed: the engine is not running.
        :raises CartridgeRetired: the cartridge was replaced while the call waited for a
            start-up (the caller routes again, to the new version).
        """
        slot.waiting += 1
        try:
            return await self._connection(slot)
        finally:
            slot.waiting -= 1

    async def _connection(self, slot: CartridgeSlot) -> Connection:
        single = slot.single
        if single is not None:
            conn = single.conn
            if conn is not None and conn.ready:
                return conn
            return await self.ensure_started(slot, single)
        best = slot.least_loaded()
        idle = slot.startable(anyio.current_time(), self._config.spawn_retry_after)
        if idle and self._tg is not None and not self._closed:
            first = idle[0] if best is None else None
            for replica in idle:
                if replica is not first:
                    self.start_soon(slot, replica)
            if first is not None:
                return await self.ensure_started(slot, first)
        if best is not None:
            return best
        # Every replica is starting or failed: wait for the first starting one.
        waiting = next(
            (r for r in slot.replicas if r.conn is not None and r.conn.state is ConnState.STARTING),
            slot.replicas[0],
        )
        return await self.ensure_started(slot, waiting)

    async def ensure_started(self, slot: CartridgeSlot, replica: Replica) -> Connection:
        """The replica's ready connection, starting it (or waiting for its start) if needed.

        :raises SpawnFailed: its start-up failed (now, or before and not to be retried yet).
        :raises EngineClosed: the engine is not running.
        :raises CartridgeRetired: the cartridge was replaced or removed.
        """
        if slot.retired:
            raise CartridgeRetired(f"cartridge {slot.name} was retired: it starts no instance")
        if self._closed:
            raise EngineClosed()
        if self._tg is None:
            raise EngineClosed(
                "the engine is not running: use it as `async with Engine() as engine`"
            )
        conn = replica.conn
        if conn is not None and conn.ready:
            return conn
        async with replica.lock:
            conn = replica.conn
            if conn is not None and conn.ready:
                return conn
            if conn is not None and conn.state is ConnState.CLOSING:
                await conn.dead.wait()
            elif conn is not None and conn.state is ConnState.STARTING:
                await conn.started.wait()
                if conn.ready:
                    return conn
                if slot.retired:
                    raise _stopped_start(slot)
            if replica.failure is not None:
                retry = self._config.spawn_retry_after
                if retry is None or anyio.current_time() - replica.failed_at < retry:
                    raise replica.failure
                replica.failure = None
            if self._closed or self._tg is None:
                raise EngineClosed()
            if slot.retired:
                raise CartridgeRetired(f"cartridge {slot.name} was retired: it starts no instance")
            assert self._log_dir is not None
            replica.starts += 1
            if replica.starts > 1:
                self._counters.respawns += 1
            log_name = slot.name if replica.index == 0 else f"{slot.name}.{replica.index}"
            watchdog = self._watchdog

            def ended(conn: Connection) -> None:
                watchdog.ended(slot, replica, conn)

            caps_before = slot.caps or ()
            conn = Connection(
                placement=slot.placement,
                spec=LaunchSpec(
                    name=slot.name, replica=replica.index, target=slot.target, env=slot.env
                ),
                config=self._config,
                counters=self._counters,
                log_path=self._log_dir / f"{log_name}.stderr.log",
                on_peer_request=self._on_peer_request,
                on_dead=ended,
            )
            conn.metric_totals = slot.metric_totals  # the sums survive a restart
            replica.conn = conn
            self._tg.start_soon(conn.run)
            await conn.started.wait()
            self._on_started()
            if conn.ready:
                watchdog.started(slot, replica, conn)
                watchdog.caps_changed(slot, caps_before, slot.caps or ())
            else:
                failure = conn.startup_error or SpawnFailed(
                    f"cartridge {slot.name} stopped during start-up",
                    step="spawn",
                    stderr_tail=conn.stderr_tail,
                )
                if slot.retired:  # stopped by its replacement or removal, not a failure
                    raise _stopped_start(slot)
                replica.failure = failure
                replica.failed_at = anyio.current_time()
                watchdog.failed(slot, replica, failure.message)
                raise failure
            return conn


def _stopped_start(slot: CartridgeSlot) -> CartridgeRetired:
    return CartridgeRetired(
        f"cartridge {slot.name} was retired during its start-up: it starts no instance"
    )
