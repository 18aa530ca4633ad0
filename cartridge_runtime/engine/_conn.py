"""One running cartridge process: its pipes, start-up, frame routing, health and death.

Theory of operation
-------------------
A :class:`Connection` owns one subprocess and four tasks in its own task group:

* the **reader** reads stdout in large blocks, feeds the sans-IO :class:`FrameDecoder` and
  dispatches every frame at once (no polling): during start-up to the start-up channel, after
  it by request id to the flow that owns it (an engine call, or a peer call forwarded here)
  or, for frames of a peer call this cartridge made, to that peer link;
* the **writer** waits for queued frames and hands everything queued to one ``writev``
  (length prefixes and bodies as separate buffers: big payloads are never joined or copied);
* the **stderr** reader appends to a log file and keeps a bounded tail in memory;
* the **heartbeat** task probes the cartridge and marks it unhealthy when a reply is late.

Every frame written goes through one :class:`SeqAssigner` (flow frames numbered per (rid, xid),
stragglers after a terminal dropped and counted) and is encoded at once, checked against the
negotiated ``max_frame``. EOF on stdout, a frame that does not decode, or the process ending
is death: the process is reaped (killed if it lingers), and every pending flow is failed with
``CARTRIDGE_DIED`` naming the exit status or signal and the stderr tail.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import subprocess
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .. import protocol as P
from ..protocol import Frame, FrameType, MessageId, frames
from ._config import EngineConfig
from ._errors import CallError, CartridgeDied, EngineClosed, SpawnFailed
from ._fdio import FdReader, FdWriter, make_pipe
from ._pools import PoolGate
from ._proc import Counters, Flow, PeerOrigin, describe_returncode

if TYPE_CHECKING:
    from ..manifest import Manifest

log = logging.getLogger("cartridge_runtime.engine")

_pack_len = struct.Struct(">I").pack
#: How long a cartridge whose stdout closed may take to exit before it is killed.
_EXIT_WAIT = 0.5
#: Request ids remembered after their flow ended, to tell stragglers from unroutable frames.
_CLOSED_RIDS = 4096


class Connection:
    """A started (or starting) cartridge process. Created and driven by the engine."""

    def __init__(
        self,
        *,
        name: str,
        command: list[str],
        env: Mapping[str, str] | None,
        config: EngineConfig,
        counters: Counters,
        log_path: Path,
        on_peer_request: Callable[[Connection, Frame], None],
        on_dead: Callable[[Connection], None],
    ) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.config = config
        self.counters = counters
        self.log_path = log_path
        self._on_peer_request = on_peer_request
        self._on_dead = on_dead

        self.state = "starting"  # starting -> ready -> (closing) -> dead | failed
        self.process: anyio.abc.Process | None = None
        self.limits: P.Limits = config.limits
        self.manifest: Manifest | None = None
        self.caps: list[str] = []
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
        self._closed_rids: dict[MessageId, None] = {}
        self._next_xid = 1

        self._seq = P.SeqAssigner()
        self._decoder = P.FrameDecoder(config.limits.max_frame)
        self._out: list[bytes] = []
        self._wake = anyio.Event()
        self._drained = anyio.Event()
        self._drained.set()
        self._startup_tx, self._startup_rx = anyio.create_memory_object_stream[Frame](1024)
        self._death_reason = ""
        self._tail = ""
        self._stderr_done = anyio.Event()
        self._hb_pending: dict[MessageId, tuple[anyio.Event, list[Frame]]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._notified = False
        self._stdin: FdWriter | None = None
        self._stdout: FdReader | None = None
        self._kill_reason: str | None = None
        self._scope = anyio.CancelScope()

    # -- public helpers --------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

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
            del self._closed_rids[next(iter(self._closed_rids))]

    # -- writing ---------------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        """Queue one frame for the writer (numbered and encoded now, in queue order).

        :raises FrameEncodeError: the frame does not fit the negotiated max_frame.
        """
        if self.state in ("dead", "failed"):
            self.counters.drops += 1
            return
        numbered = self._seq.assign(frame)
        if numbered is None:
            self.counters.stragglers += 1
            return
        body = P.encode_body(numbered)
        if len(body) > self.limits.max_frame:
            raise P.FrameEncodeError(
                f"{numbered.frame_type.name} frame body of {len(body)} bytes exceeds "
                f"max_frame {self.limits.max_frame}"
            )
        # Prefix and body go to writev as two buffers: the body is never copied again.
        self._out.append(_pack_len(len(body)))
        self._out.append(body)
        self._wake.set()
        if self._drained.is_set():
            self._drained = anyio.Event()

    async def drain(self) -> None:
        """Wait until everything queued so far was handed to the pipe."""
        await self._drained.wait()

    async def _writer(self) -> None:
        assert self._stdin is not None
        stdin = self._stdin
        try:
            while True:
                while not self._out:
                    self._drained.set()
                    self._wake = anyio.Event()
                    await self._wake.wait()
                    # One turn of the loop lets the task that woke us queue the rest of its
                    # frames (a small call's REQ, stream and END), so they leave in one write.
                    await anyio.lowlevel.checkpoint()
                batch, self._out = self._out, []
                await stdin.send_all(batch)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The cartridge stopped reading; the reader sees its end and reports death.
            self._out.clear()
            self._drained.set()

    # -- reading ---------------------------------------------------------------------------

    async def _reader(self) -> None:
        assert self._stdout is not None
        stdout = self._stdout
        decoder = self._decoder
        size = self.config.read_size
        reason = "closed its stdout"
        try:
            while True:
                try:
                    data = await stdout.receive(size)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    data = b""
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    self._dispatch(frame)
                if not data:
                    break
        except P.ProtocolError as exc:
            self.counters.protocol_errors += 1
            reason = f"wrote bytes that are not a valid frame on stdout: {exc}"
        await self._die(reason)

    def _dispatch(self, frame: Frame) -> None:
        if self.state == "starting":
            try:
                self._startup_tx.send_nowait(frame)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.counters.drops += 1
            return
        ft = frame.frame_type
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
        if ft.is_flow or ft in (FrameType.CREDIT, FrameType.CANCEL, FrameType.CLOSE_STREAM):
            flow = self.calls.get(frame.id)
            origin = self.peer_in.get(frame.id)
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
            else:
                self.counters.no_route += 1
                log.debug("%s: no route for %r", self.name, frame)
            return
        if ft is FrameType.ERR and frame.id in self._hb_pending:
            pending = self._hb_pending[frame.id]
            pending[1].append(frame)
            pending[0].set()
            return
        # HELLO after the handshake, POLICY, RELAY_* from a cartridge: not allowed; counted.
        self.counters.drops += 1
        self.counters.protocol_errors += ft is not FrameType.HELLO
        log.warning("%s: unexpected %s frame from the cartridge dropped", self.name, ft.name)

    # -- stderr ----------------------------------------------------------------------------

    async def _stderr_reader(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        limit = self.config.stderr_tail_chars
        try:
            # A local log file, written in line-sized blocks: not worth a thread hop.
            with open(self.log_path, "ab") as logfile:  # noqa: ASYNC230
                async for block in self.process.stderr:
                    logfile.write(block)
                    logfile.flush()
                    tail = self._tail + block.decode("utf-8", "replace")
                    self._tail = tail[-limit:] if len(tail) > limit else tail
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self._stderr_done.set()

    # -- life ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Spawn, start up, then serve until death or shutdown. Never raises."""
        try:
            with self._scope:
                in_r, in_w = make_pipe()
                out_r, out_w = make_pipe()
                try:
                    with anyio.fail_after(self.config.step_timeout):
                        self.process = await anyio.open_process(
                            self.command,
                            stdin=in_r,
                            stdout=out_w,
                            stderr=subprocess.PIPE,
                            env=dict(self.env) if self.env is not None else None,
                        )
                except (OSError, TimeoutError) as exc:
                    for fd in (in_r, in_w, out_r, out_w):
                        os.close(fd)
                    self._fail_start("spawn", f"cannot start {' '.join(self.command)!r}: {exc}")
                    return
                os.close(in_r)
                os.close(out_w)
                self._stdin = FdWriter(in_w)
                self._stdout = FdReader(out_r)
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    tg.start_soon(self._stderr_reader)
                    tg.start_soon(self._reader)
                    tg.start_soon(self._writer)
                    await self._startup()
                    if self.state == "ready" and self.config.heartbeat_interval:
                        tg.start_soon(self._heartbeat_loop)
        finally:
            with anyio.CancelScope(shield=True):
                await self._reap(kill=True)
                if self.state != "failed":
                    closing = self.state == "closing"
                    self.state = "dead"
                    if closing and not self._notified:
                        self._fail_all(EngineClosed(f"cartridge {self.name} was shut down"))
                    if self.death is None:
                        how = describe_returncode(self.returncode)
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
        if proc.returncode is None:
            with anyio.move_on_after(_EXIT_WAIT):
                await proc.wait()
        if proc.returncode is None and kill:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        self.returncode = proc.returncode
        with anyio.move_on_after(_EXIT_WAIT):
            await self._stderr_done.wait()
        for end in (self._stdin, self._stdout):
            if end is not None:
                end.close()
        if proc.stderr is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await proc.stderr.aclose()

    def _fail_start(self, step: str, message: str, rule: str | None = None) -> None:
        tail = self._tail.strip()
        full = f"cartridge {self.name}: {message}"
        if tail:
            full += f"\nstderr:\n{tail}"
        self.startup_error = SpawnFailed(full, step=step, rule=rule, stderr_tail=tail)
        self.state = "failed"
        self.started.set()
        self._scope.cancel()

    async def _next_startup_frame(self, step: str) -> Frame:
        try:
            return await self._startup_rx.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise _StartupAbort(step, self._death_reason) from None

    async def _startup(self) -> None:
        from ..manifest import Manifest, ManifestError, ManifestRuleError

        step = "hello"
        timeout = self.config.step_timeout
        try:
            with anyio.fail_after(timeout):
                self.send(frames.hello(self.config.limits))
                hello = P.accept_cartridge_hello(
                    await self._next_startup_frame(step), self.config.limits
                )
            self.limits = hello.limits
            self._decoder.max_frame = hello.limits.max_frame
            step = "identity"
            check = P.IdentityCheck()
            with anyio.fail_after(timeout):
                for f in check.frames():
                    self.send(f)
                while not check.receive(await self._next_startup_frame(step)):
                    pass
            step = "manifest"
            try:
                manifest = Manifest.from_json(hello.manifest)
                manifest.validate()
            except ManifestRuleError as exc:
                self._fail_start(step, f"manifest breaks {exc}", exc.rule)
                return
            except ManifestError as exc:
                self._fail_start(step, f"manifest is invalid: {exc}")
                return
            step = "policy"
            with anyio.fail_after(timeout):
                self.send(frames.policy(self.config.policy))
                await self.drain()
        except TimeoutError:
            await self._settle_stderr()
            self._fail_start(step, f"start-up step {step!r} got no answer within {timeout:g} s")
            return
        except _StartupAbort as exc:
            await self._settle_stderr()
            rc = describe_returncode(self.process.returncode if self.process else None)
            self._fail_start(
                exc.step, f"start-up step {exc.step!r} failed: the cartridge {exc.reason} ({rc})"
            )
            return
        except P.ProtocolError as exc:
            await self._settle_stderr()
            self._fail_start(step, f"start-up step {step!r} failed: {exc}")
            return
        self.manifest = manifest
        self.caps = [cap.urn for cap in manifest.iter_caps()]
        self.gate = PoolGate(hello.pools)
        self.state = "ready"
        self._startup_rx.close()
        # Frames that raced in behind the identity echo (CREDIT, LOG) are routed normally.
        self.started.set()

    async def _settle_stderr(self) -> None:
        """Give a failing cartridge a moment to finish writing its stderr."""
        proc = self.process
        if proc is not None and proc.returncode is None:
            with anyio.move_on_after(0.2):
                await proc.wait()
        with anyio.move_on_after(0.2 if proc is not None and proc.returncode is not None else 0.05):
            await self._stderr_done.wait()

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
        how = describe_returncode(self.returncode)
        reason = self._kill_reason or f"it {reason}"
        message = f"cartridge {self.name} died ({how}); {reason}"
        if tail:
            message += f". stderr:\n{tail}"
        self.death = CartridgeDied(message, returncode=self.returncode, stderr_tail=tail)
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

    def kill(self, reason: str) -> None:
        """Kill the process now (pending calls fail with ``CARTRIDGE_DIED``)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        self._kill_reason = reason

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
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        self._scope.cancel()
        await self.dead.wait()

    # -- health ----------------------------------------------------------------------------

    async def probe(self, reply_within: float | None = None) -> bool:
        """Send one HEARTBEAT and wait for its reply; update health. Returns healthy."""
        hid = MessageId.new()
        event = anyio.Event()
        replies: list[Frame] = []
        self._hb_pending[hid] = (event, replies)
        try:
            self.send(frames.heartbeat(hid))
            with anyio.move_on_after(
                self.config.heartbeat_timeout if reply_within is None else reply_within
            ):
                await event.wait()
        finally:
            self._hb_pending.pop(hid, None)
        if not replies:
            if self.healthy:
                log.warning("%s: no heartbeat reply; marked unhealthy", self.name)
            self.healthy = False
            self.counters.heartbeat_misses += 1
            return False
        self.healthy = True
        self.last_heartbeat = anyio.current_time()
        meta = dict(replies[0].meta or {})
        pools = meta.pop("pools", None)
        if isinstance(pools, bytes | str):
            try:
                import json

                parsed = json.loads(pools)
                if isinstance(parsed, dict):
                    self.gate.update(parsed)
            except ValueError:
                self.counters.protocol_errors += 1
        self.remote_stats = meta
        return True

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval
        assert interval
        while self.state == "ready":
            await anyio.sleep(interval)
            if self.state != "ready":
                break
            await self.probe()


class _StartupAbort(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(reason)
        self.step = step
        self.reason = reason or "ended"
