"""One running cartridge process: its pipes, tasks, start-up timing, health timing and death.

Theory of operation
-------------------
A :class:`Connection` is the thin IO shell around a sans-IO
:class:`~cartridge_runtime.protocol.HostConnection` (its :attr:`~Connection.core`), which
holds the connection's state, numbers every frame sent and decides where every frame received
goes. The class reads in the order of a call's life: **state** (what the engine asks about),
**start** (launch, start-up, ready), **send request** (what a call queues: its own module,
:mod:`._sending`), **receive response** (the reader), **health** (probes) and **close**
(shutdown, kill, death).

The connection owns one cartridge instance, started by its placement (a local subprocess, or
a runtime in this process: see :mod:`.._placements`), and four tasks in its own task group:

* the **reader** pumps the instance's ``stdout`` byte stream with the shared
  :class:`~cartridge_runtime._plumbing.FramePump` (for a subprocess on asyncio from a reader
  callback registered once), which feeds the sans-IO :class:`FrameDecoder` and hands every
  frame to the core at once; a frame the core routes to its owner (an engine call, a
  forwarded peer call, a peer call this cartridge made) costs one dict lookup, and the few
  events the core returns (frames to send, a new peer call, a probe's reply, start-up
  progress, a refused frame) are acted on here;
* the **writer** (the shared :class:`~cartridge_runtime._plumbing.FrameOutbox`, encoding at
  queue time with the seq the core gives each frame) hands everything queued to one
  ``writev``; its task only runs when the pipe is full, because code that queues several
  frames at once writes them itself and a lone frame is written from a loop callback;
* the **stderr** reader (:mod:`._stderr`) appends to a log file and keeps a bounded tail in
  memory;
* the **heartbeat** task (:mod:`._health`) probes the cartridge on a timer.

The start-up (:mod:`._startup`) and the probes (:mod:`._health`) reach the connection through
the narrow interfaces they declare (:class:`~._startup.StartupLink`,
:class:`~._health.ProbeLink`). EOF on stdout, a frame that does not decode, or the instance
ending is death: the instance is reaped (killed if it lingers), and every pending flow is
failed with ``CARTRIDGE_DIED`` naming the exit status or signal and the stderr tail.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ... import protocol as P
from ..._plumbing import Block, FrameOutbox, FramePump, Wake, source_for, wake_factory
from ...protocol import (
    ConnState,
    Frame,
    FrameRefused,
    HostConnection,
    HostEvent,
    MessageId,
    PeerRequest,
    ProbeAnswered,
    SendFrames,
    StartupPhase,
    StartupProgress,
)
from .._config import EngineConfig
from .._errors import CallError, CartridgeDied, CartridgeUnhealthy, EngineClosed, SpawnFailed
from .._placements._command import describe_stray_bytes
from .._placements._seam import Instance, LaunchError, LaunchSpec, Placement
from ._block_hold import BlockHold, Holdable
from ._counters import Counters
from ._gate import PoolGate
from ._health import heartbeat_loop
from ._health import probe as probe_health
from ._links import Flow, PeerOrigin
from ._preamble import StdoutPreamble
from ._sending import CallSending
from ._startup import StartupFailure, run_startup
from ._stderr import StderrLog

_MAX_FRAME = operator.attrgetter("max_frame")

if TYPE_CHECKING:
    from ...manifest import Manifest

log = logging.getLogger("cartridge_runtime.engine")

#: How long a cartridge whose stdout closed may take to exit before it is killed.
_EXIT_WAIT = 0.5


class _Reply:
    """A probe waiting for its reply."""

    __slots__ = ("event", "frame")

    def __init__(self, event: anyio.Event) -> None:
        self.event = event
        self.frame: Frame | None = None


class Connection(CallSending):
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

        #: The protocol state of the connection: start-up, life, routing, health.
        self.core: HostConnection[Flow, PeerOrigin] = HostConnection(
            limits=config.limits,
            policy=config.policy,
            counters=counters,
            misses_to_kill=config.heartbeat_misses_to_kill,
        )
        core = self.core
        self.next_xid = core.next_xid
        self.add_flow = core.add_flow
        self.forget = core.forget
        #: The negotiated max_frame (the outbox reads it per frame, from C: no Python frame).
        self.max_frame = config.limits.max_frame
        #: The frame queue and its writer; frames are numbered by the core.
        self.outbox = FrameOutbox(
            None, functools.partial(_MAX_FRAME, self), number=self.core.seq.number, counts=counters
        )
        #: The reader's hold while it dispatches a block: the outbox, and the ends frames
        #: are forwarded to (peer links).
        self._block = BlockHold(self.outbox)
        #: ``batch(other)``: frames this cartridge sent are about to be forwarded to
        #: ``other``, held until the block being dispatched ends (the hold's own method).
        self.batch: Callable[[Holdable], None] = self._block.batch
        #: The frame tap (``config.frame_tap``): told of every frame sent and received.
        self._tap = config.frame_tap

        self.process: Instance | None = None
        self.manifest: Manifest | None = None
        #: The media definitions its manifest ships (outputs are held to them, HST-24).
        self.manifest_media: tuple[Any, ...] = ()
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

        self._decoder = P.FrameDecoder(config.limits.max_frame)
        self._startup_tx, self._startup_rx = anyio.create_memory_object_stream[StartupProgress](8)
        self._end_reason = ""
        self._stderr = StderrLog(log_path, config.stderr_tail_chars, config.stderr_log_max_bytes)
        self._replies: dict[MessageId, _Reply] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._notified = False
        self._kill_reason: str | None = None
        self._unhealthy = False
        #: Words for stray text on the cartridge's stdout, once the decoder failed on it.
        self._stray: str | None = None
        self._preamble: StdoutPreamble | None = None
        self._scope = anyio.CancelScope()
        #: Whether the instance is known to have ended (its ``wait()`` returned).
        self._ended = False
        #: The running backend's event class, made directly (``anyio.Event()`` looks the
        #: backend up on every call).
        self.new_event: Callable[[], anyio.Event] = type(anyio.Event())
        #: The running backend's one-shot wake-up (a bare future on asyncio).
        self.new_wake: Callable[[], Wake] = wake_factory()

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> ConnState:
        """Where the connection stands: starting, ready, closing, dead or failed."""
        return self.core.state

    @property
    def ready(self) -> bool:
        return self.core.state is ConnState.READY

    @property
    def limits(self) -> P.Limits:
        """The negotiated limits (the engine's own before the cartridge's HELLO)."""
        return self.core.limits

    @property
    def healthy(self) -> bool:
        return self.core.healthy

    @property
    def last_heartbeat(self) -> float | None:
        return self.core.last_heartbeat

    @property
    def remote_stats(self) -> Mapping[str, Any]:
        return self.core.remote_stats

    @property
    def in_flight(self) -> int:
        """Requests this engine sent that are still running (calls and forwarded peer calls)."""
        return len(self.core.calls)

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
        return self._stderr.tail

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

    # -- start: launch, handshake, ready ---------------------------------------------------

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
                    self.outbox.attach(self.process.stdin)
                    self._tg = tg
                    tg.start_soon(self._stderr.run, self.process.stderr)
                    tg.start_soon(self._reader)
                    tg.start_soon(self.outbox.run)
                    outcome = await run_startup(self, self.core.handshake, self.config.step_timeout)
                    if isinstance(outcome, StartupFailure):
                        self._fail_start(outcome.step, outcome.message, outcome.rule, outcome.cause)
                        return
                    self._ready(outcome)
                    interval = self.config.heartbeat_interval
                    if self.core.ready and interval:
                        tg.start_soon(heartbeat_loop, self, interval, self.config.heartbeat_timeout)
        finally:
            with anyio.CancelScope(shield=True):
                await self._reap(kill=True)
                if self.core.state is not ConnState.FAILED:
                    closing = self.core.ended() is ConnState.CLOSING
                    self.outbox.close()
                    if closing and not self._notified:
                        self._fail_all(EngineClosed(f"cartridge {self.name} was shut down"))
                    if self.death is None:
                        how = self.exit_description
                        self.death = CartridgeDied(
                            f"cartridge {self.name} was stopped ({how})",
                            returncode=self.returncode,
                            stderr_tail=self._stderr.tail.strip(),
                        )
                    if not self._notified:
                        self._fail_all(self.death)
                self._startup_tx.close()
                self._startup_rx.close()
                self.started.set()
                self.dead.set()

    def _ready(self, manifest: Manifest) -> None:
        """The start-up succeeded: take the manifest and the pools, and serve."""
        hello = self.core.handshake.hello
        assert hello is not None
        self.manifest = manifest
        self.manifest_media = manifest.media_defs
        self.caps = [cap.urn for cap in manifest.iter_caps()]
        self.gate = PoolGate(hello.pools)
        self.core.started()
        self._startup_rx.close()
        self.started.set()

    def _fail_start(
        self, step: str, message: str, rule: str | None = None, cause: Exception | None = None
    ) -> None:
        tail = self._stderr.tail.strip()
        if self._preamble is not None and self._preamble.only_text:
            message += " after only text on its stdout (a program that is not a cartridge?)"
        full = f"cartridge {self.name}: {message}"
        if tail:
            full += f"\nstderr:\n{tail}"
        self.startup_error = SpawnFailed(full, step=step, rule=rule, stderr_tail=tail)
        self.startup_error.__cause__ = cause  # the typed protocol error, when there is one
        self.core.fail_startup()
        self.outbox.close()
        self.started.set()
        self._scope.cancel()

    async def next_startup_event(self) -> StartupProgress | None:
        """The next start-up event the reader saw; ``None`` once the instance ended."""
        try:
            return await self._startup_rx.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    def end_reason(self) -> str:
        """Why the instance's output ended, once it did (empty before)."""
        return self._end_reason

    async def settle_stderr(self) -> None:
        """Give a failing cartridge a moment to finish writing its stderr."""
        proc = self.process
        ended = False
        if proc is not None:
            with anyio.move_on_after(0.2):
                await proc.wait()
                ended = True
        with anyio.move_on_after(0.2 if ended else 0.05):
            await self._stderr.done.wait()

    # -- receive response ------------------------------------------------------------------

    async def _reader(self) -> None:
        """Pump the instance's stdout through the decoder, routing every frame at once; its
        end (or bytes that are not frames) is the connection's death."""
        assert self.process is not None
        reason = "closed its stdout"
        # The hot loop: one call per frame, with what it needs bound as locals.
        receive = self.core.receive_frame
        on_event = self._on_event

        def route(frame: Frame) -> None:
            event = receive(frame)
            if event is not None:
                on_event(event)

        dispatch: Callable[[Frame], None] = route
        tap = self._tap
        if tap is not None:
            name, on_received, plain = self.name, tap.on_received, route

            def tapped(frame: Frame) -> None:
                on_received(name, frame)
                plain(frame)

            dispatch = tapped
        else:
            # A plain response's frames in one C call each; the rest through ``route``.
            dispatch = P.response_router(self.core, route) or route

        # Frames the routing queues (CREDIT, forwarded peer frames, heartbeat replies) are
        # held while a block is dispatched and leave together in one write after it.
        pump = FramePump(
            self._decoder,
            dispatch,
            hold=self._block,
            read_size=self.config.read_size,
            on_error=self._note_stray,
        )
        on_block = pump.on_block
        route_block = P.block_router() if tap is None else None
        if route_block is not None:
            # A block's plain response frames read and routed in one C call, with no frame
            # made; from the first it does not take, the pump and the router above. (The
            # frames it takes queue nothing to send: no hold is needed around them.)
            core, decoder, pumped = self.core, self._decoder, on_block

            def on_block(data: Block) -> bool:
                if type(data) is memoryview and decoder.at_frame_boundary:
                    end = route_block(core, data, decoder.max_frame)
                    if end:
                        if end == len(data):
                            return True
                        data = data[end:]
                return pumped(data)

        # Lines of text before the first frame are the cartridge's log, not a death.
        on_line = functools.partial(self._stderr.add_stdout_line, self.name)
        self._preamble = preamble = StdoutPreamble(on_block, on_line)
        try:
            await pump.run(source_for(self.process.stdout), through=preamble.feed)
        except P.ProtocolError as exc:
            self.counters.protocol_errors += 1
            reason = self._stray or f"wrote bytes that are not a valid frame on stdout: {exc}"
        await self._die(reason)

    def _note_stray(self, data: bytes | memoryview, error: P.ProtocolError) -> None:
        """Keep words for the block the decoder failed on (stray text on stdout, often)."""
        self._stray = describe_stray_bytes(data, self._decoder.max_frame)

    def _on_event(self, event: HostEvent) -> None:
        """Act on what the core asks for (off the hot path)."""
        if isinstance(event, SendFrames):
            for frame in event.frames:
                self.send(frame)
        elif isinstance(event, PeerRequest):
            self._on_peer_request(self, event.frame)
        elif isinstance(event, ProbeAnswered):
            waiting = self._replies.get(event.hid)
            if waiting is not None and waiting.frame is None:
                waiting.frame = event.reply
                waiting.event.set()
        elif isinstance(event, StartupProgress):
            if event.error is None and event.phase is StartupPhase.IDENTITY:
                max_frame = self.core.limits.max_frame
                self._decoder.max_frame = max_frame
                self.max_frame = max_frame
            for frame in event.frames:
                self.send(frame)
            try:
                self._startup_tx.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.counters.drops += 1
        elif isinstance(event, FrameRefused):
            log.warning("%s: %s dropped", self.name, event.reason)

    # -- health ----------------------------------------------------------------------------

    async def ask(
        self, meta: Mapping[str, Any] | None, within: float, hid: MessageId | None = None
    ) -> Frame | None:
        """Send a HEARTBEAT (``meta``: desired capacities; ``hid``: its id, default a new
        one) and wait up to ``within`` seconds for its reply (a HEARTBEAT, or an ERR refusing
        the capacities); ``None``: none came."""
        hid, frame = self.core.probe(meta, hid)
        waiting = _Reply(self.new_event())
        self._replies[hid] = waiting
        try:
            self.send(frame)
            with anyio.move_on_after(within):
                await waiting.event.wait()
        finally:
            self.core.probe_ended(hid)
            del self._replies[hid]
        return waiting.frame

    def update_pools(self, pools: Mapping[str, Any]) -> None:
        """Apply the pools a heartbeat reply carried to admission."""
        self.gate.update(pools)

    async def probe(self, reply_within: float | None = None) -> bool:
        """Send one HEARTBEAT and wait for its reply; update health. Returns healthy."""
        within = self.config.heartbeat_timeout if reply_within is None else reply_within
        return await probe_health(self, within)

    # -- close -----------------------------------------------------------------------------

    async def close(self, grace: float) -> None:
        """Shut down: close stdin, give the cartridge ``grace`` seconds to exit, then kill."""
        if self.core.gone:
            await self.dead.wait()
            return
        self.core.begin_close()
        proc = self.process
        if proc is not None and not self.core.gone:
            with anyio.move_on_after(grace):
                await self.drain()
            proc.stdin.close()
            with anyio.move_on_after(grace):
                await proc.wait()
                self._ended = True
            if not self._ended:
                proc.kill()
        self._scope.cancel()
        await self.dead.wait()

    def kill(self, reason: str, *, unhealthy: bool = False) -> None:
        """Kill the instance now (pending calls fail with ``CARTRIDGE_DIED``, or with
        ``CARTRIDGE_UNHEALTHY`` when it is killed for missing health probes)."""
        if self.process is not None:
            self.process.kill()
        self._kill_reason = reason
        self._unhealthy = unhealthy

    async def _die(self, reason: str) -> None:
        core = self.core
        if core.gone:
            return
        if core.state is ConnState.STARTING:
            self._end_reason = reason
            self._startup_tx.close()
            return
        was_closing = core.ended() is ConnState.CLOSING
        self.outbox.close()
        with anyio.CancelScope(shield=True):
            await self._reap(kill=True)
        tail = self._stderr.tail.strip()
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
            await self._stderr.done.wait()
        await proc.aclose()

    def _fail_all(self, error: CallError) -> None:
        self._notified = True
        self.gate.abort(error)
        flows, origins = self.core.take_all()
        for flow in flows:
            flow.on_death(error)
        for origin in origins:
            origin.on_origin_death()
        self.dead.set()
        self._on_dead(self)
