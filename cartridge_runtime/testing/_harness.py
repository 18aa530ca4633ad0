"""An in-process host for testing a :class:`CartridgeRuntime` (or a single :class:`Op`).

:class:`CartridgeHarness` runs the runtime through the engine's own connection to a cartridge
in this process (:class:`~cartridge_runtime.engine.InProcess`, memory streams): the engine's
start-up (HELLO, identity check, manifest check, POLICY), its reader, writer and routing by
request id, its answers to the cartridge's heartbeats and its health probes. On top the
harness keeps what a test needs to see and steer: it chooses each request's id and routing
id, sends its arguments credit-paced, and sees every frame received through the connection's
frame tap (``received``, ``heartbeats``, ``unrouted``; each with the cartridge's seq). Every
response is checked by a :class:`BodyReceiver` (so a malformed response fails the test) and
gathered into a :class:`CallResult`. Frames the test sends (``send_frame``) and raw bytes
(``send_raw``) go out as they are, in order with everything else, for bad-input tests; peer
calls the cartridge makes reach the ``peers`` callbacks through the connection's routing.

::

    async with CartridgeHarness(runtime) as h:
        result = await h.call("cap:in=media:;op=echo;out=media:", [("media:", b"hi")])
        assert result.main_bytes == b"hi"

Arguments
    Each argument of ``call()`` / ``start_call()`` is a ``(media_urn, value)`` pair or an
    :class:`Input` (``Input(media_urn, value, unbounded=False, is_sequence=None, meta=None)``)
    for stream options. Every argument is its own stream, and each CHUNK waits for credit:

    * ``bytes``-like → a scalar stream cut at the negotiated chunk size; ``str`` → its UTF-8.
    * a ``list``/``tuple`` → a sequence stream, one item per element. An element may be an
      :class:`Item` (``Item(value, meta)``; the engine's ``Item`` is accepted too) or a
      ``(value, meta)`` pair (meta a mapping or ``None``) to give the item its meta; any other
      element is the item's value (use a list for a CBOR array value).
    * an async iterable of ``bytes``/``str`` → streamed piece by piece as it yields, paced by the
      cartridge's CREDIT (large inputs never sit in memory whole); with ``is_sequence=True``
      each piece is one item instead.
    * ``Input(..., unbounded=True)`` → STREAM_START says ``unbounded`` and STREAM_END has no
      chunk count.

Pending calls and cancel
    ``start_call()`` sends REQ and the arguments (and END unless ``end=False``) and returns a
    :class:`HarnessCall`: ``await call.result(timeout)`` waits for END/ERR,
    ``await call.cancel(code=None, attribution_class=None, message=None, force_kill=False)``
    sends CANCEL (reason meta only when given), ``call.partial`` is what arrived so far.

Peers
    ``peers={cap: async fn(cap, inputs) -> bytes | PeerReply}`` answers the cartridge's peer
    calls: bytes are the main output, a :class:`PeerReply` gives a sequence main output and
    any other outputs; a raised ``OpError`` (anything with ``code``) is an ERR with its code,
    class and ``arg_urn``. A call's
    cap text equal to a key picks that key; otherwise the keys are matched like the runtime
    dispatches (:func:`cartridge_runtime.urn.select_handler`), so an equivalent spelling (tag
    order, quoting, a more specific request) reaches the callback. No match → ERR NO_HANDLER.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.abc

from cartridge_runtime.engine import DirectConnection, EngineConfig, InProcess, direct_connection
from cartridge_runtime.protocol import (
    CartridgeHello,
    ErrorReport,
    Frame,
    FrameType,
    HandshakeError,
    Limits,
    MessageId,
    encode_frame,
    frames,
)

from ._harness_call import (
    CallResult,
    HarnessCall,
    Input,
    InputSpec,
    Item,
    StreamResult,
)
from ._harness_peer import HarnessPeerCall, PeerHandler, PeerReply, answer_peer, pick_peer

__all__ = (
    "CartridgeHarness",
    "CallResult",
    "ErrorReport",
    "HarnessCall",
    "Input",
    "InputSpec",
    "Item",
    "PeerHandler",
    "PeerReply",
    "StreamResult",
    "call_sync",
    "memory_byte_pipe",
    "run_op",
)

#: Seconds each start-up step may take (as the harness always allowed).
_STEP_TIMEOUT = 10.0
#: Names of the harness's connections (for the frame tap and messages).
_names = itertools.count(1)


class _ByteRecv(anyio.abc.ByteReceiveStream):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.inner.aclose()


class _ByteSend(anyio.abc.ByteSendStream):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: bytes) -> None:
        await self.inner.send(bytes(item))

    async def aclose(self) -> None:
        await self.inner.aclose()


def memory_byte_pipe(
    buffer: float = 64,
) -> tuple[anyio.abc.ByteSendStream, anyio.abc.ByteReceiveStream]:
    """A one-way in-memory byte pipe (closing the send side is EOF for the receiver)."""
    s, r = anyio.create_memory_object_stream[bytes](buffer)
    return _ByteSend(s), _ByteRecv(r)


class CartridgeHarness:
    """Drive a runtime in-process through the engine's connection (see the module docstring).

    :param handshake: wait for the start-up (HELLO, identity, manifest, POLICY) on entry
        (``False``: enter at once; ``await handshake()`` waits for it).
    :param policy: the POLICY word sent after the identity check (``None``: send none).
    :param peers: ``{cap_urn: async fn(cap, inputs) -> bytes}`` answering the cartridge's peer calls.
    """

    def __init__(
        self,
        runtime: Any,
        *,
        limits: Limits | None = None,
        handshake: bool = True,
        policy: str | None = "full",
        peers: dict[str, PeerHandler] | None = None,
    ) -> None:
        self.runtime = runtime
        self.host_limits = limits or Limits()
        self.limits = self.host_limits
        self.do_handshake = handshake
        self.policy = policy
        self.peers = dict(peers or {})
        self.received: list[Frame] = []
        self.exit_status: int | None = None
        self.hello: CartridgeHello | None = None
        self.heartbeats: list[Frame] = []
        self.unrouted: list[Frame] = []
        #: Every request id the harness opened (its flow is released once the call ends).
        self._opened: set[MessageId] = set()
        self._peer_calls: set[MessageId] = set()
        self._probes: set[MessageId] = set()
        self._routing = False
        self._frame_event = anyio.Event()
        self._conn: DirectConnection | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> CartridgeHarness:
        # Served as it is, like ``runtime.serve()`` itself would: a test may register
        # handlers the manifest does not declare.
        config = EngineConfig(
            step_timeout=_STEP_TIMEOUT,
            heartbeat_interval=None,
            policy=self.policy,
            limits=self.host_limits,
            frame_tap=self,
        )
        self._conn = direct_connection(
            InProcess(self.runtime, check=False),
            name=f"harness-{next(_names)}",
            config=config,
            on_peer_request=self._on_peer_request,
        )
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._conn.run)
        if self.do_handshake:
            try:
                await self.handshake()
            except BaseException:
                # A failed start-up leaves nothing running behind the caller's back.
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        conn, tg = self._live()
        with anyio.move_on_after(10):
            await conn.close(10)
        self._note_exit()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    @property
    def connection(self) -> DirectConnection:
        """The engine's connection the harness drives (its ``counters`` and ``in_flight``
        show what the routing did with late frames and which calls are still routed)."""
        conn, _ = self._live()
        return conn

    def _live(self) -> tuple[DirectConnection, anyio.abc.TaskGroup]:
        if self._conn is None or self._tg is None:
            raise RuntimeError("the harness is not running: use `async with CartridgeHarness(...)`")
        return self._conn, self._tg

    def _note_exit(self) -> None:
        conn = self._conn
        if conn is not None and conn.dead.is_set():
            self.exit_status = conn.returncode

    async def wait_exit(self, timeout: float = 10) -> int | None:
        """The runtime's exit status once ``serve()`` returned."""
        conn, _ = self._live()
        with anyio.fail_after(timeout):
            await conn.dead.wait()
        self._note_exit()
        return self.exit_status

    async def close_input(self) -> None:
        """EOF on the cartridge's input (after what was queued before)."""
        conn, _ = self._live()
        await conn.close_input()  # its end is then a shutdown, not a death

    async def send_raw(self, data: bytes) -> None:
        """Queue ``data`` to the cartridge as it is (need not be a frame)."""
        conn, _ = self._live()
        conn.send_raw(data)
        await anyio.lowlevel.checkpoint()

    async def send_frame(self, frame: Frame) -> None:
        """Queue ``frame`` as it is: its own seq, checksum and routing id. The reply to a
        HEARTBEAT sent this way is the connection's probe reply, so it is not answered back."""
        if frame.frame_type is FrameType.HEARTBEAT:
            conn, _ = self._live()
            conn.expect_reply(frame.id, frame.meta)
            self._probes.add(frame.id)
        await self.send_raw(encode_frame(frame))

    def _send_now(self, frame: Frame) -> None:
        """Queue a frame the harness makes (credit, arguments, peer answers) as it is."""
        if self._conn is not None:
            self._conn.send_raw(encode_frame(frame))

    async def handshake(self) -> None:
        """Wait for the engine's start-up: HELLO exchange, identity check, manifest, POLICY.

        :raises HandshakeError: the cartridge's HELLO or identity echo is wrong.
        :raises SpawnFailed: another start-up step failed (no answer within 10 s, a manifest
            the engine refuses, an early exit).
        """
        conn, _ = self._live()
        await conn.started.wait()
        error = conn.startup_error
        if error is not None:
            cause = error.__cause__
            if isinstance(cause, HandshakeError):
                raise cause
            raise error
        self.hello = conn.hello
        self.limits = conn.limits
        self._routing = True

    # -- the frame tap ---------------------------------------------------------------------

    def on_received(self, connection: str, frame: Frame) -> None:
        """Every frame from the cartridge, before the connection routes it."""
        self.received.append(frame)
        ft = frame.frame_type
        if ft is FrameType.HEARTBEAT and frame.id not in self._probes:
            self.heartbeats.append(frame)
        elif (
            self._routing
            and ft is not FrameType.REQ
            and ft is not FrameType.HEARTBEAT
            and frame.id not in self._opened
            and frame.id not in self._peer_calls
            and frame.id not in self._probes
        ):
            self.unrouted.append(frame)
        self._frame_event.set()
        self._frame_event = anyio.Event()

    def on_sent(self, connection: str, frame: Frame) -> None:
        """Frames the connection itself sends (start-up, probes, answers to heartbeats)."""

    # -- requests --------------------------------------------------------------------------

    def _open(self, rid: MessageId, xid: MessageId | None) -> HarnessCall:
        conn, _ = self._live()
        call = HarnessCall(rid, xid, self.limits, self._send_now, conn.forget)
        self._opened.add(rid)
        conn.add_flow(rid, call)
        return call

    async def start_call(
        self,
        cap: str,
        inputs: Sequence[InputSpec] = (),
        *,
        xid: MessageId | None = None,
        rid: MessageId | None = None,
        end: bool = True,
    ) -> HarnessCall:
        """Send REQ and the arguments (credit-paced; see the module docstring for the shapes),
        then the requester END unless ``end=False``; returns the pending :class:`HarnessCall`.

        :raises TypeError: an argument of an unsupported shape.
        """
        rid = rid or MessageId.new()
        call = self._open(rid, xid)
        try:
            await self.send_frame(frames.req(rid, cap, xid=xid))
            await call.send_inputs(inputs)
            if end and not call.finished:
                await self.send_frame(frames.end(rid, xid=xid, response=False))
        except BaseException:
            call.abandon()  # nobody holds the call: what comes for it is late
            raise
        return call

    async def result(self, call: HarnessCall, timeout: float = 30) -> CallResult:
        """Wait for the call's END or ERR (same as ``await call.result(timeout)``)."""
        return await call.result(timeout)

    async def call(
        self,
        cap: str,
        inputs: Sequence[InputSpec] = (),
        *,
        xid: MessageId | None = None,
        timeout: float = 30,
    ) -> CallResult:
        """Call ``cap`` with ``inputs`` and wait for the result.

        The arguments are sent while responses are read, so a handler that answers before it
        has read everything (or an early ERR) does not deadlock on credit.
        """
        holder: list[HarnessCall] = []
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                holder.append(await self.start_call(cap, inputs, xid=xid))

            tg.start_soon(go)
        return await holder[0].result(timeout)

    async def heartbeat(
        self, meta: dict[str, Any] | None = None, hid: MessageId | None = None
    ) -> Frame:
        """Probe the cartridge with a HEARTBEAT (the engine's probe) and return the reply (a
        HEARTBEAT, or ERR for an unknown pool).

        :raises TimeoutError: no reply within 10 s.
        """
        conn, _ = self._live()
        hid = hid or MessageId.new()
        self._probes.add(hid)
        reply = await conn.ask(meta, 10, hid)
        if reply is None:
            raise TimeoutError(f"no reply to HEARTBEAT {hid} within 10 s")
        return reply

    async def wait_for(self, predicate: Callable[[Frame], bool], timeout: float = 10) -> Frame:
        """The first received frame (past or future) matching ``predicate``."""
        with anyio.fail_after(timeout):
            while True:
                for f in self.received:
                    if predicate(f):
                        return f
                await self._frame_event.wait()

    # -- peer calls from the cartridge ------------------------------------------------------

    def _on_peer_request(self, req: Frame) -> None:
        """The connection's routing found a new REQ from the cartridge: gather it."""
        conn, _ = self._live()
        self._peer_calls.add(req.id)
        peer = HarnessPeerCall(req, conn.limits, self._send_now, self._peer_ended)
        conn.add_origin(req.id, peer)
        # A REQ may carry no stream and its END may still come: nothing else to do yet.

    def _peer_ended(self, rid: MessageId, cap: str, inputs: list[tuple[str, bytes]]) -> None:
        _, tg = self._live()
        tg.start_soon(self._answer_peer, rid, cap, inputs)

    async def _answer_peer(self, rid: MessageId, cap: str, inputs: list[tuple[str, bytes]]) -> None:
        conn, _ = self._live()
        handler = pick_peer(self.peers, cap)
        out = await answer_peer(handler, rid, cap, inputs, self.limits.effective_chunk)
        conn.forget(rid)
        for frame in out:
            self._send_now(frame)


async def run_op(
    op: Any,
    cap: str,
    inputs: Sequence[InputSpec] = (),
    *,
    manifest: Any = None,
) -> CallResult:
    """Serve ``op`` (an :class:`Op` class or factory) for ``cap`` in a fresh runtime and call it once."""
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    if manifest is None:
        manifest = Manifest.build(
            name="harness",
            version="0.0.0",
            description="in-process test cartridge",
            caps=[CapDef.simple(cap, "Under test", aliases="under-test")],
        )
    runtime = CartridgeRuntime(manifest)
    runtime.register_op(cap, op)
    async with CartridgeHarness(runtime) as h:
        return await h.call(cap, inputs)


def call_sync(
    runtime: Any,
    cap: str,
    inputs: Sequence[InputSpec] = (),
    *,
    backend: str = "asyncio",
    timeout: float = 30,
) -> CallResult:
    """Synchronous one-shot call for non-async test code (``timeout`` as for
    :meth:`CartridgeHarness.call`)."""

    async def main() -> CallResult:
        async with CartridgeHarness(runtime) as h:
            return await h.call(cap, inputs, timeout=timeout)

    return anyio.run(main, backend=backend)
