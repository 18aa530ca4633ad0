"""Engine configuration: timeouts, health probes, policy, limits, shutdown."""

from __future__ import annotations

from pathlib import Path

import attrs

from ..protocol import DEFAULT_LIMITS, Limits, NetworkPolicy
from ._connection._tap import FrameTap
from ._placements._seam import Placement


@attrs.frozen(kw_only=True)
class EngineConfig:
    """Knobs of an :class:`Engine`. Every field has a working default.

    :ivar step_timeout: seconds allowed for each start-up step (spawn, HELLO, identity, POLICY).
    :ivar heartbeat_interval: seconds between health probes of a running cartridge (``None``: off).
    :ivar heartbeat_timeout: seconds a probe may wait for its reply before the cartridge is
        marked unhealthy.
    :ivar heartbeat_misses_to_kill: consecutive probes without a reply after which the
        cartridge is killed (its pending calls fail with :class:`CartridgeUnhealthy`; the next
        call starts it again), e.g. when an async handler never yields; ``None``: never.
    :ivar policy: the network policy sent to every cartridge after its identity check
        (``None``: no POLICY frame, for test hosts that check a cartridge's default).
    :ivar limits: the limits offered in HELLO (each cartridge negotiates the minimum).
    :ivar shutdown_grace: seconds a cartridge gets to exit after its stdin closes, before a kill.
    :ivar cancel_grace: seconds a cancelled call waits for the cartridge's terminal frame
        (its ERR ``CANCELLED``, or an END that won the race). Then ``cancel(force_kill=True)``
        kills the process, and a plain cancel (also the one made by leaving an ``async with
        engine.call(...)`` block early) fails the call locally with ``CANCELLED`` and frees its
        pool slot; frames that still arrive for it are counted as stragglers and dropped. So a
        cancel never hangs, even against a cartridge that ignores CANCEL.
    :ivar spawn_retry_after: seconds after a failed start-up before a call may try again;
        ``None`` means never (until :meth:`Engine.restart`).
    :ivar max_pending_logs: most LOG and progress events one call keeps for its caller; past
        it the oldest unread are dropped and counted (``Response.dropped_logs``,
        ``Result.dropped_logs``), so a flood of logs nobody reads costs bounded memory.
    :ivar stderr_tail_chars: how much of each cartridge's stderr is kept in memory.
    :ivar stderr_log_max_bytes: size at which a cartridge's stderr log file is rotated (the
        previous one is kept as ``NAME.stderr.log.1``); ``None``: never.
    :ivar log_dir: directory for the per-cartridge stderr logs (kept); ``None`` = a private
        temporary directory, removed when the engine shuts down.
    :ivar read_size: bytes asked for per read of a cartridge's stdout.
    :ivar placement: where cartridges added without a ``placement=`` run (``None``: each in a
        local subprocess, :class:`~cartridge_runtime.engine.Subprocess`).
    :ivar frame_tap: told of every frame each connection sends and receives
        (:class:`~cartridge_runtime.engine.FrameTap`, for test tools and debugging); ``None``:
        no tap, and no cost per frame.
    """

    step_timeout: float = 10.0
    heartbeat_interval: float | None = 30.0
    heartbeat_timeout: float = 10.0
    heartbeat_misses_to_kill: int | None = 3
    policy: NetworkPolicy | None = attrs.field(
        default=NetworkPolicy.OFFLINE, converter=attrs.converters.optional(NetworkPolicy)
    )
    limits: Limits = DEFAULT_LIMITS
    shutdown_grace: float = 2.0
    cancel_grace: float = 1.0
    spawn_retry_after: float | None = None
    max_pending_logs: int = 1000
    stderr_tail_chars: int = 2000
    stderr_log_max_bytes: int | None = 16 << 20
    log_dir: Path | None = None
    read_size: int = 1 << 20  # several 256 KiB CHUNK frames per read: fewer calls and copies
    placement: Placement | None = None
    frame_tap: FrameTap | None = attrs.field(default=None, eq=False)
