"""Engine configuration: timeouts, health probes, policy, limits, shutdown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from ..protocol import DEFAULT_LIMITS, Limits, NetworkPolicy
from ._connection._tap import FrameTap
from ._placements._seam import Placement

if TYPE_CHECKING:
    from ..machine import MediaDef

#: Items of one map of a machine run in flight at once (the cartridge's pool admits what it
#: can of them).
DEFAULT_WINDOW: Final = 64


def _media_defs(value: Iterable[MediaDef | Mapping[str, Any]]) -> tuple[MediaDef, ...]:
    """Media definitions given as records or in the registry's form, as records (the machine
    model, where the record lives, is imported only when there are some)."""
    value = tuple(value)
    if not value:
        return ()
    from ..machine import MediaDef

    return tuple(e if isinstance(e, MediaDef) else MediaDef.from_json(e) for e in value)


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
    :ivar activity_timeout: seconds a call may go without receiving a frame before it is
        cancelled and fails with ``TIMEOUT`` ("no activity for N s"); a cap's metadata
        ``activity_timeout_secs`` and a call's ``activity_timeout=`` override it; ``None``: off.
        Each quarter of it without a frame is reported (:class:`CallStalled`).
    :ivar memory_limit: resident bytes (of an instance's process tree) past which it is
        killed and its calls fail with ``OOM_KILLED``, for cartridges added without their own
        ``memory_limit=``; ``None``: no limit.
    :ivar memory_interval: seconds between two samples of the instances' memory.
    :ivar memory_backstop: on Linux, an instance with a memory limit also gets ``RLIMIT_AS`` at
        this many times the limit (address space runs well ahead of resident memory); ``None``:
        the watchdog alone.
    :ivar idle_timeout: seconds without a call after which an instance is stopped (and started
        again by the next call), for cartridges added without their own ``idle_timeout=``;
        ``None``: never (the default).
    :ivar retry_backoff: seconds before the first retry of a machine step with ``retry=N``
        (doubling with each, capped at ``retry_max_delay``, with jitter).
    :ivar retry_max_delay: the longest delay between two attempts of a machine step.
    :ivar tune_allocator: while the engine runs, keep CHUNK-sized buffers in glibc's heap
        instead of an ``mmap`` each (much faster large transfers; see
        :func:`cartridge_runtime.protocol.hold_allocator`); glibc's defaults come back when the
        last engine of the process exits. ``False``: the engine never touches malloc's settings.
    :ivar heap_trim_interval: seconds between two trims of this process's heap
        (``malloc_trim``), made only after calls were served or an instance ended since the
        last, so a long-lived host gives freed memory back; ``None``: never.
    :ivar frame_tap: told of every frame each connection sends and receives
        (:class:`~cartridge_runtime.engine.FrameTap`, for test tools and debugging); ``None``:
        no tap, and no cost per frame.
    :ivar media: media definitions (:class:`~cartridge_runtime.machine.MediaDef`, or objects
        in the registry's form) the outputs of every call are held to when they end, before a
        cartridge's own ``media_defs`` (HST-24).
    :ivar check_outputs: hold outputs to their media definitions (``False``: never; a
        cartridge or a call may also turn it off).
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
    activity_timeout: float | None = 120.0
    memory_limit: int | None = None
    memory_interval: float = 1.0
    memory_backstop: float | None = 4.0
    idle_timeout: float | None = None
    retry_backoff: float = 0.5
    retry_max_delay: float = 30.0
    tune_allocator: bool = True
    heap_trim_interval: float | None = 30.0
    frame_tap: FrameTap | None = attrs.field(default=None, eq=False)
    media: tuple[MediaDef, ...] = attrs.field(default=(), converter=_media_defs, eq=False)
    check_outputs: bool = True
