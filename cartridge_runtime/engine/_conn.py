"""One running cartridge process: its pipes, start-up, frame routing, health and death.

Theory of operation
-------------------
A :class:`Connection` owns one cartridge instance, started by its placement (a local
subprocess, or a runtime in this process: see :mod:`._placement`), and four tasks in its own
task group:

* the **reader** reads the instance's output in large blocks (for a subprocess on asyncio
  from a reader callback registered once, see :func:`~cartridge_runtime._fdio.read_blocks`),
  feeds the sans-IO :class:`FrameDecoder` and
  dispatches every frame at once (no polling): during start-up to the start-up channel, after
  it by request id to the flow that owns it (an engine call, or a peer call forwarded here)
  or, for frames of a peer call this cartridge made, to that peer link;
* the **writer** (the writing half lives in :mod:`._outbox`) waits for queued frames and
  hands everything queued to one ``writev``; it only runs when the pipe is full or nobody
  flushed, because code that queues several frames at once writes them itself;
* the **stderr** reader appends to a log file and keeps a bounded tail in memory;
* the **heartbeat** task probes the cartridge and marks it unhealthy when a reply is late.

Every frame written is numbered (per (rid, xid) flow, stragglers after a terminal dropped and
counted) and encoded at once, checked against the negotiated ``max_frame``. EOF on stdout, a
frame that does not decode, or the instance ending is death: the instance is reaped (killed if
it lingers), and every pending flow is failed with ``CARTRIDGE_DIED`` naming the exit status
or signal and the stderr tail.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .. import protocol as P
from ..protocol import Frame, FrameType, MessageId, frames
from . import _health
from ._config import EngineConfig
from ._errors import CallError, CartridgeDied, CartridgeUnhealthy, EngineClosed, SpawnFailed
from ._outbox import Outbox
from ._placement import ByteSink, Instance, LaunchError, LaunchSpec, Placement
from ._pools import PoolGate
from ._proc import Counters, Flow, PeerOrigin, describe_stray_bytes
from ._startup import run_startup

if TYPE_CHECKING:
    from ..manifest import Manifest

log = logging.getLogger("cartridge_runtime.engine")

#: How long a cartridge whose stdout closed may take to exit before it is killed.
_EXIT_WAIT = 0.5
#: Request ids remembered after their flow ended, to tell stragglers from unroutable frames.
_CLOSED_RIDS = 4096
#: Frame types routed by request id (to a call, a peer link, or counted as late).
_ROUTED = frozenset(
    [ft for ft in FrameType if ft.is_flow and ft is not FrameType.REQ]
    + [FrameType.CREDIT, FrameType.CANCEL, FrameType.CLOSE_STREAM]
)


class Connection(Outbox):
    """A started (or starting) cartridge instance. Created and driven by the engine."""

    def __init__(
        self,
        *,
        placement: Placement,
        spec: LaunchSpec,
        config: EngineConfig,
        counters: Counters,
        log_path: Path,
        on_peer_request: Callable[[Connection, Frame], None],
        on_dead: Callable[[Connection], None],
    ) -> None:
        self.name = spec.name
        self.command = list(spec.target.command)
        self._placement = placement
        self._spec = spec
        self.config = config
        self.counters = counters
        self.log_path = log_path
        self._on_peer_request = on_peer_request
        self._on_dead = on_dead

        self.state = "starting"  # starting -> ready -> (closing) -> dead | failed
        self.process: Instance | None = None
        self.limits: P.Limits = config.limits
        self.manifest: Manifest | None = None
        self.caps: list[str] = []
        #: Handler cap text -> its definition in the manifest (None: not declared), per call.
        self._definitions: dict[str, Any] = {}
        #: Metric name -> the sum of the values its handlers reported (REQ-39); the engine
        #: shares one dict per cartridge across restarts.
        self.metric_totals: dict[str, float] = {}
        self.gate = PoolGate()
        self.startup_error: SpawnFailed | None = None
        self.death: CartridgeDied | None = None
        self.returncode: int | None = None
        self.started = anyio.Event()  # set when start-up succeeded or failed
        self.dead = anyio.Event()
        self.healthy = True
        self.last_heartbeat: float | None = None
        self.remote_stats: dict[str, Any] = {}

        self.calls: dict[MessageId, Flow] = {}
        self.peer_in: dict[MessageId, PeerOrigin] = {}
        # FIFO: an OrderedDict drops its oldest entry in O(1) (a dict's next(iter()) scans
        # past all the deleted slots at its front: ~10 µs per call at this size).
        self._closed_rids: OrderedDict[MessageId, None] = OrderedDict()
        self._next_xid = 1

        self._init_outbox()
        self._decoder = P.FrameDecoder(config.limits.max_frame)
        self._startup_tx, self._startup_rx = anyio.create_memory_object_stream[Frame](1024)
        self._death_reason = ""
        self._tail = ""
        self._stderr_done = anyio.Event()
        self._hb_pending: dict[MessageId, tuple[anyio.Event, list[Frame]]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._notified = False
        self._stdin: ByteSink | None = None
        self._kill_reason: str | None = None
        self._unhealthy = False
        #: Words for stray text on the cartridge's stdout, once the decoder failed on it.
        self._stray: str | None = None
        self._scope = anyio.CancelScope()
        #: Whether the instance is known to have ended (its ``wait()`` returned).
        self._ended = False
        #: The running backend's event class, made directly (``anyio.Event()`` looks the
        #: backend up on every call).
        self.new_event: Callable[[], anyio.Event] = type(anyio.Event())

    # -- public helpers --------------------------------------------------------------------

    def definition(self, handler_cap: str) -> Any:
        """The :class:`~cartridge_runtime.manifest.CapDef` the manifest gives ``handler_cap``
        (``None`` before the manifest is known, or when it does not declare it)."""
        found = self._definitions.get(handler_cap, False)
        if found is not False:
            return found
        manifest = self.manifest
        if manifest is None:
            return None
        found = next((c for c in manifest.iter_caps() if c.urn == handler_cap), None)
        if found is None:
            found = manifest.find_cap(handler_cap)
        self._definitions[handler_cap] = found
        return found

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def placement_id(self) -> str | None:
        """Who the instance is (``pid 1234``, ``in-process NAME/0``...), once launched."""
        return self.process.placement_id if self.process is not None else None

    @property
    def exit_description(self) -> str:
        """How the instance ended (``exit status 3``...), or ``still running``."""
        return self.process.describe_exit() if self.process is not None else "still running"

    @property
    def stderr_tail(self) -> str:
        return self._tail

    def next_xid(self) -> MessageId:
        """A fresh small-uint routing id for a request sent on this connection."""
        xid = MessageId(self._next_xid)
        self._next_xid += 1
        return xid

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a task that must end with this connection."""
        if self._tg is not None and self.state in ("ready", "starting", "closing"):
            self._tg.start_soon(fn, *args)

    def forget(self, rid: MessageId) -> None:
        """A flow of ``rid`` ended: later frames for it are stragglers."""
        self.calls.pop(rid, None)
        self.peer_in.pop(rid, None)
        self._closed_rids[rid] = None
        if len(self._closed_rids) > _CLOSED_RIDS:
            self._closed_rids.popitem(last=False)

    # -- reading ---------------------------------------------------------------------------

    async def _reader(self) -> None:
        assert self.process is not None
        reason = "closed its stdout"
        try:
            await self.process.read_blocks(
                self.config.read_size,
                self._on_block,
                self._read_size,
                bytearray(self.config.read_size),
            )
        except P.ProtocolError as exc:
            self.counters.protocol_errors += 1
            reason = self._stray or f"wrote bytes that are not a valid frame on stdout: {exc}"
        await self._die(reason)

    def _read_size(self) -> int:
        """The size of the next read: a whole block at a frame boundary, else just the rest
        of the frame in progress (at most a block). Reads then end on frame boundaries, where
        the decoder parses the block in place instead of copying it into its buffer."""
        decoder = self._decoder
        size = self.config.read_size
        if decoder.at_frame_boundary:
            return size
        try:
            return min(decoder.bytes_wanted, size)
        except P.ProtocolError:  # the decoder failed: the next feed raises it
            return size

    def _on_block(self, data: bytes | memoryview) -> None:
        """Decode a block of stdout (``b""``: end of file) and dispatch every frame in it.

        A view is of the reader's reusable buffer: the decoder parses it in place and, as
        every frame is taken below, keeps none of it once this returns.

        :raises ProtocolError: the bytes are not valid frames.
        """
        decoder = self._decoder
        # Frames the dispatch queues (CREDIT, forwarded peer frames, heartbeat replies)
        # leave together in one write after the block.
        self._hold += 1
        try:
            if type(data) is memoryview:
                decoder.feed_borrowed(data)
            else:
                decoder.feed(data)
            dispatch = self._dispatch
            while (frame := decoder.next_frame()) is not None:
                dispatch(frame)
        except P.ProtocolError:
            self._stray = describe_stray_bytes(data, decoder.max_frame)
            raise
        finally:
            self._hold -= 1
        if self._out and not self._hold:
            self.flush()

    def _dispatch(self, frame: Frame) -> None:
        ft = frame.frame_type
        if ft in _ROUTED and self.state != "starting":
            # The hot path: a response frame of one of our calls.
            rid = frame.id
            flow = self.calls.get(rid)
            origin = self.peer_in.get(rid) if self.peer_in else None
            if flow is not None and origin is None:
                if ft is FrameType.CANCEL or ft is FrameType.CLOSE_STREAM:
                    self.counters.drops += 1
                    return
                flow.on_frame(frame)
                return
            self._route_other(frame, ft, flow, origin)
            return
        if self.state == "starting":
            try:
                self._startup_tx.send_nowait(frame)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.counters.drops += 1
            return
        if ft is FrameType.HEARTBEAT:
            pending = self._hb_pending.get(frame.id)
            if pending is not None:
                pending[1].append(frame)
                pending[0].set()
            else:
                self.send(frames.heartbeat(frame.id))
            return
        if ft is FrameType.REQ:
            if frame.id in self.peer_in:
                self.counters.protocol_errors += 1
                log.warning("%s: second REQ for request %s dropped", self.name, frame.id)
                return
            self._on_peer_request(self, frame)
            return
        # HELLO after the handshake, POLICY, RELAY_* from a cartridge: not allowed; counted.
        self.counters.drops += 1
        self.counters.protocol_errors += ft is not FrameType.HELLO
        log.warning("%s: unexpected %s frame from the cartridge dropped", self.name, ft.name)

    def _route_other(
        self, frame: Frame, ft: FrameType, flow: Flow | None, origin: PeerOrigin | None
    ) -> None:
        """Route a flow/CREDIT/CANCEL frame that is not simply a response to one of our calls."""
        if ft is FrameType.ERR and frame.id in self._hb_pending:  # a refused desired capacity
            pending = self._hb_pending[frame.id]
            pending[1].append(frame)
            pending[0].set()
            return
        if flow is not None and origin is not None:
            # The same rid both ways (a cartridge calling itself with a reused id):
            # CREDIT says its direction; other frames carry our xid when they answer us.
            if ft is FrameType.CREDIT:
                to_flow = (frame.meta or {}).get("credit_dir") == P.CreditDirection.REQUEST
            else:
                to_flow = frame.routing_id == flow.xid and ft not in (
                    FrameType.CANCEL,
                    FrameType.CLOSE_STREAM,
                )
            if to_flow:
                origin = None
            else:
                flow = None
        if flow is not None:
            if ft in (FrameType.CANCEL, FrameType.CLOSE_STREAM):
                self.counters.drops += 1
                return
            flow.on_frame(frame)
        elif origin is not None:
            origin.on_requester_frame(frame)
        elif frame.id in self._closed_rids:
            # A grant racing the terminal is harmless and expected; anything else is late.
            if ft is FrameType.CREDIT:
                self.counters.late_credits += 1
            else:
                self.counters.stragglers += 1
        elif ft is FrameType.ERR and frame.id in self._hb_pending:
            pending = self._hb_pending[frame.id]  # a cartridge refusing a health probe
            pending[1].append(frame)
            pending[0].set()
        else:
            self.counters.no_route += 1
            log.debug("%s: no route for %r", self.name, frame)

    # -- stderr ----------------------------------------------------------------------------

    async def _stderr_reader(self) -> None:
        assert self.process is not None
        stderr = self.process.stderr
        if stderr is None:
            self._stderr_done.set()
            return
        limit = self.config.stderr_tail_chars
        cap = self.config.stderr_log_max_bytes
        logfile = None
        try:
            # A local log file, written in line-sized blocks: not worth a thread hop.
            logfile = open(self.log_path, "ab")  # noqa: ASYNC230, SIM115
            written = logfile.tell()
            async for block in stderr:
                if cap is not None and written + len(block) > cap and written:
                    # Rotate: the full file becomes NAME.1 (replacing an older one).
                    logfile.close()
                    os.replace(self.log_path, f"{self.log_path}.1")
                    logfile = open(self.log_path, "ab")  # noqa: ASYNC230, SIM115
                    written = 0
                logfile.write(block)
                logfile.flush()
                written += len(block)
                tail = self._tail + block.decode("utf-8", "replace")
                self._tail = tail[-limit:] if len(tail) > limit else tail
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            if logfile is not None:
                logfile.close()
            self._stderr_done.set()

    # -- life ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Launch, start up, then serve until death or shutdown. Never raises."""
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    # A placement that needs longer (a cluster to reach, a node to find)
                    # says so with ``launch_timeout``.
                    limit = getattr(self._placement, "launch_timeout", None)
                    try:
                        with anyio.fail_after(self.config.step_timeout if limit is None else limit):
                            self.process = await self._placement.launch(self._spec, tg)
                    except (LaunchError, TimeoutError) as exc:
                        self._fail_start("spawn", f"cannot start {' '.join(self.command)!r}: {exc}")
                        return
                    self._stdin = self.process.stdin
                    self._tg = tg
                    tg.start_soon(self._stderr_reader)
                    tg.start_soon(self._reader)
                    tg.start_soon(self._writer)
                    await run_startup(self)
                    if self.state == "ready" and self.config.heartbeat_interval:
                        tg.start_soon(_health.heartbeat_loop, self)
        finally:
            with anyio.CancelScope(shield=True):
                await self._reap(kill=True)
                if self.state != "failed":
                    closing = self.state == "closing"
                    self.state = "dead"
                    if closing and not self._notified:
                        self._fail_all(EngineClosed(f"cartridge {self.name} was shut down"))
                    if self.death is None:
                        how = self.exit_description
                        self.death = CartridgeDied(
                            f"cartridge {self.name} was stopped ({how})",
                            returncode=self.returncode,
                            stderr_tail=self._tail.strip(),
                        )
                    if not self._notified:
                        self._fail_all(self.death)
                self._startup_tx.close()
                self._startup_rx.close()
                self.started.set()
                self.dead.set()

    async def _reap(self, *, kill: bool) -> None:
        proc = self.process
        if proc is None:
            return
        if not self._ended:
            with anyio.move_on_after(_EXIT_WAIT):
                await proc.wait()
                self._ended = True
        if not self._ended and kill:
            proc.kill()
            await proc.wait()
            self._ended = True
        self.returncode = proc.returncode
        with anyio.move_on_after(_EXIT_WAIT):
            await self._stderr_done.wait()
        await proc.aclose()

    def _fail_start(self, step: str, message: str, rule: str | None = None) -> None:
        tail = self._tail.strip()
        full = f"cartridge {self.name}: {message}"
        if tail:
            full += f"\nstderr:\n{tail}"
        self.startup_error = SpawnFailed(full, step=step, rule=rule, stderr_tail=tail)
        self.state = "failed"
        self.started.set()
        self._scope.cancel()

    async def _die(self, reason: str) -> None:
        if self.state in ("dead", "failed"):
            return
        if self.state == "starting":
            self._death_reason = reason
            self._startup_tx.close()
            return
        was_closing = self.state == "closing"
        self.state = "dead"
        with anyio.CancelScope(shield=True):
            await self._reap(kill=True)
        tail = self._tail.strip()
        how = self.exit_description
        reason = self._kill_reason or f"it {reason}"
        if was_closing and self._kill_reason is None:
            # Asked to stop, it ended: a shutdown, not a death (whatever ended first, its
            # output or its process, which an in-process instance does in one go).
            message = f"cartridge {self.name} was stopped ({how}); {reason}"
        else:
            message = f"cartridge {self.name} died ({how}); {reason}"
        if tail:
            message += f". stderr:\n{tail}"
        died = CartridgeUnhealthy if self._unhealthy else CartridgeDied
        self.death = died(message, returncode=self.returncode, stderr_tail=tail)
        if was_closing:
            self._fail_all(
                EngineClosed(f"cartridge {self.name} was shut down while the call was pending")
            )
        else:
            log.warning("%s", message)
            self._fail_all(self.death)
        self._scope.cancel()

    def _fail_all(self, error: CallError) -> None:
        self._notified = True
        self.gate.abort(error)
        flows, self.calls = list(self.calls.values()), {}
        origins, self.peer_in = list(self.peer_in.values()), {}
        for flow in flows:
            flow.on_death(error)
        for origin in origins:
            origin.on_origin_death()
        self.dead.set()
        self._on_dead(self)

    def kill(self, reason: str, *, unhealthy: bool = False) -> None:
        """Kill the instance now (pending calls fail with ``CARTRIDGE_DIED``, or with
        ``CARTRIDGE_UNHEALTHY`` when it is killed for missing health probes)."""
        if self.process is not None:
            self.process.kill()
        self._kill_reason = reason
        self._unhealthy = unhealthy

    async def close(self, grace: float) -> None:
        """Shut down: close stdin, give the cartridge ``grace`` seconds to exit, then kill."""
        if self.state in ("dead", "failed"):
            await self.dead.wait()
            return
        if self.state == "ready":
            self.state = "closing"
        proc = self.process
        if proc is not None and self._stdin is not None:
            with anyio.move_on_after(grace):
                await self.drain()
            self._stdin.close()
            with anyio.move_on_after(grace):
                await proc.wait()
                self._ended = True
            if not self._ended:
                proc.kill()
        self._scope.cancel()
        await self.dead.wait()

    async def probe(self, reply_within: float | None = None) -> bool:
        """Send one HEARTBEAT and wait for its reply; update health. Returns healthy."""
        return await _health.probe(self, reply_within)
