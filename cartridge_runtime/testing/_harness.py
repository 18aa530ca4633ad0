"""An in-process host for testing a :class:`CartridgeRuntime` (or a single :class:`Op`).

:class:`CartridgeHarness` runs ``runtime.serve()`` over anyio memory streams and plays the host:
the real HELLO exchange, the identity check, POLICY (the engine's own sans-IO
:class:`~cartridge_runtime.protocol.HostHandshake`), then requests with credit-paced arguments.
Past the handshake it is a raw host on purpose: every frame received is kept (``received``).
Every response is checked by a :class:`BodyReceiver` (so a malformed response fails the test)
and gathered into a :class:`CallResult`. Raw frames and raw bytes can be sent for bad-input
tests; peer calls the cartridge makes are answered by the ``peers`` callbacks.

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

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import attrs
import cbor2

from cartridge_runtime._redact import describe, describe_meta
from cartridge_runtime.protocol import (
    AttributionClass,
    BodyEnded,
    BodyReceiver,
    CartridgeHello,
    ErrorCode,
    ErrorReport,
    Frame,
    FrameDecoder,
    FrameType,
    HandshakeError,
    HostHandshake,
    Limits,
    LogReceived,
    MessageId,
    ProgressReceived,
    StartupPhase,
    StreamClosed,
    StreamData,
    StreamItem,
    StreamOpened,
    accept_cartridge_hello,
    encode_frame,
    frames,
)
from cartridge_runtime.urn import select_handler

from ._harness_call import (
    CallResult,
    HarnessCall,
    Input,
    InputSpec,
    Item,
    StreamResult,
    split_item,
)

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


@attrs.frozen(kw_only=True)
class PeerReply:
    """What a fake peer (``peers={cap: handler}``) answers when plain bytes are not enough.

    :param data: the main output as one scalar stream (bytes, or text as UTF-8).
    :param items: the main output as a sequence stream instead (each element a value, an
        :class:`Item` or a ``(value, meta)`` pair).
    :param outputs: further outputs by media URN (STREAM_START key 21): bytes or text for a
        scalar stream, a list for a sequence.
    :param media_urn: the main stream's media URN.
    """

    data: bytes | str = attrs.field(default=b"", repr=describe)
    items: Sequence[Any] | None = attrs.field(default=None, repr=describe)
    outputs: Mapping[str, Any] = attrs.field(factory=dict, repr=describe_meta)
    media_urn: str = "media:"


#: A fake peer: ``async fn(cap, inputs) -> bytes | PeerReply``; raising a typed error
#: (``OpError``, ``CallError``) answers ERR with its code, class and ``arg_urn``.
PeerHandler = Callable[[str, list[tuple[str, bytes]]], Awaitable["bytes | PeerReply"]]


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
    """Drive a runtime in-process (see the module docstring).

    :param handshake: do HELLO, identity and POLICY on entry (``False`` to test them by hand).
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
        self._handshake = HostHandshake(self.host_limits, policy)
        self._handshake_error: HandshakeError | None = None
        self._identity_event = anyio.Event()
        self.heartbeats: list[Frame] = []
        self.unrouted: list[Frame] = []
        self._calls: dict[MessageId, HarnessCall] = {}
        self._peer_reqs: dict[MessageId, tuple[BodyReceiver, list[tuple[str, bytearray]], str]] = {}
        self._frame_event = anyio.Event()
        self._exited = anyio.Event()
        self._hello_event = anyio.Event()

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> CartridgeHarness:
        self._to_c, c_in = memory_byte_pipe()
        c_out, self._from_c = memory_byte_pipe()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._serve, c_in, c_out)
        self._tg.start_soon(self._read)
        if self.do_handshake:
            try:
                await self.handshake()
            except BaseException:
                # A failed handshake leaves nothing running behind the caller's back.
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close_input()
        with anyio.move_on_after(10):
            await self._exited.wait()
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)

    async def _serve(
        self, c_in: anyio.abc.ByteReceiveStream, c_out: anyio.abc.ByteSendStream
    ) -> None:
        try:
            self.exit_status = await self.runtime.serve(c_in, c_out)
        finally:
            await c_out.aclose()
            self._exited.set()

    async def wait_exit(self, timeout: float = 10) -> int | None:
        """The runtime's exit status once ``serve()`` returned."""
        with anyio.fail_after(timeout):
            await self._exited.wait()
        return self.exit_status

    async def close_input(self) -> None:
        """EOF on the cartridge's input."""
        with contextlib.suppress(Exception):
            await self._to_c.aclose()

    async def send_raw(self, data: bytes) -> None:
        await self._to_c.send(data)

    async def send_frame(self, frame: Frame) -> None:
        await self.send_raw(encode_frame(frame))

    async def _send_quiet(self, frame: Frame) -> None:
        """Send a frame the harness makes on its own (credit); nothing to do once input closed."""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self.send_frame(frame)

    async def handshake(self) -> None:
        """HELLO exchange, identity check, POLICY.

        :raises HandshakeError: the cartridge's HELLO or identity echo is wrong.
        :raises TimeoutError: a step got no answer within 10 s.
        """
        hs = self._handshake
        for f in hs.start():
            await self.send_frame(f)
        with anyio.fail_after(10):
            await self._hello_event.wait()
        self._raise_handshake_error()
        with anyio.fail_after(10):
            await self._identity_event.wait()
        self._raise_handshake_error()
        for f in hs.accept_manifest():
            await self.send_frame(f)
        hs.delivered()

    def _raise_handshake_error(self) -> None:
        if self._handshake_error is not None:
            raise self._handshake_error

    async def _handshake_frame(self, f: Frame) -> bool:
        """Feed a start-up frame to the handshake; False when it is not one."""
        hs = self._handshake
        if not hs.reading or (hs.phase is StartupPhase.IDENTITY and f.id != hs.identity.rid):
            return False
        try:
            out = hs.receive(f)
        except HandshakeError as exc:
            self._handshake_error = exc
            self._hello_event.set()
            self._identity_event.set()
            return True
        if hs.hello is not None and self.hello is None:
            self.hello = hs.hello
            self.limits = hs.limits
            self._hello_event.set()
        for frame in out:
            await self._send_quiet(frame)
        if hs.phase is StartupPhase.MANIFEST:
            self._identity_event.set()
        return True

    # -- reading ---------------------------------------------------------------------------

    async def _read(self) -> None:
        decoder = FrameDecoder()
        while True:
            try:
                data = await self._from_c.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            decoder.feed(data)
            for f in decoder.frames():
                self.received.append(f)
                await self._route(f)
            self._frame_event.set()
            self._frame_event = anyio.Event()

    async def _route(self, f: Frame) -> None:
        ft = f.frame_type
        if await self._handshake_frame(f):
            return
        if ft is FrameType.HELLO and self.hello is None:
            # No handshake of ours (``handshake=False``): still learn what the cartridge said.
            self.hello = accept_cartridge_hello(f, self.host_limits)
            self.limits = self.hello.limits
            self._hello_event.set()
            return
        if ft is FrameType.HEARTBEAT:
            self.heartbeats.append(f)
            return
        call = self._calls.get(f.id)
        if ft is FrameType.CREDIT:
            if call is not None:
                call.grant(f.stream_id, f.credit or 0)
            return
        if call is None:
            if ft is FrameType.REQ or (f.id in self._peer_reqs and ft.is_flow):
                await self._peer_frame(f)
            else:
                self.unrouted.append(f)
            return
        call.partial.frames.append(f)
        res = call.partial
        events = call.receiver.receive(f)
        for ev in events:
            if isinstance(ev, StreamOpened):
                s = StreamResult(
                    ev.stream_id, ev.media_urn, ev.output, ev.is_sequence, ev.unbounded, ev.meta
                )
                call.by_id[ev.stream_id] = s
                res.streams.append(s)
            elif isinstance(ev, StreamData):
                call.by_id[ev.stream_id].values.append(ev.value)
                call.receiver.consumed(ev.stream_id)
            elif isinstance(ev, StreamItem):
                call.by_id[ev.stream_id].values.append(ev.value)
                call.by_id[ev.stream_id].items.append(Item(ev.value, ev.meta))
                call.receiver.consumed(ev.stream_id)
            elif isinstance(ev, StreamClosed):
                s = call.by_id[ev.stream_id]
                s.closed, s.chunk_count = True, ev.chunk_count
            elif isinstance(ev, LogReceived):
                res.logs.append(ev)
            elif isinstance(ev, ProgressReceived):
                res.progress.append((None if ev.indeterminate else ev.progress, ev.message))
            elif isinstance(ev, BodyEnded):
                res.end = ev.meta
            elif isinstance(ev, ErrorReport):
                res.error = ev
        call.receiver.flush_credit()
        for c in call.receiver.data_to_send():
            await self._send_quiet(c)
        if f.frame_type.is_terminal:
            call.done.set()
            call.credit_event.set()

    # -- requests --------------------------------------------------------------------------

    def _open(self, rid: MessageId, xid: MessageId | None) -> HarnessCall:
        call = HarnessCall(rid, xid, self.limits, self.send_frame)
        self._calls[rid] = call
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
        await self.send_frame(frames.req(rid, cap, xid=xid))
        await call.send_inputs(inputs)
        if end and not call.finished:
            await self.send_frame(frames.end(rid, xid=xid, response=False))
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
        """Send a HEARTBEAT and return the reply (a HEARTBEAT, or ERR for an unknown pool)."""
        hid = hid or MessageId.new()
        await self.send_frame(frames.heartbeat(hid, meta=meta))
        return await self.wait_for(
            lambda f: f.id == hid and f.frame_type in (FrameType.HEARTBEAT, FrameType.ERR)
        )

    async def wait_for(self, predicate: Callable[[Frame], bool], timeout: float = 10) -> Frame:
        """The first received frame (past or future) matching ``predicate``."""
        with anyio.fail_after(timeout):
            while True:
                for f in self.received:
                    if predicate(f):
                        return f
                await self._frame_event.wait()

    # -- peer calls from the cartridge ------------------------------------------------------

    async def _peer_frame(self, f: Frame) -> None:
        if f.frame_type is FrameType.REQ:
            rec = BodyReceiver(f.id, initial_credit=self.limits.initial_credit, expect_req=True)
            rec.receive(f)
            self._peer_reqs[f.id] = (rec, [], f.cap or "")
            return
        rec, streams, cap = self._peer_reqs[f.id]
        ids: dict[str, int] = getattr(rec, "_harness_ids", {})
        rec._harness_ids = ids  # type: ignore[attr-defined]
        for ev in rec.receive(f):
            if isinstance(ev, StreamOpened):
                ids[ev.stream_id] = len(streams)
                streams.append((ev.media_urn, bytearray()))
            elif isinstance(ev, (StreamData, StreamItem)):
                v = ev.value
                streams[ids[ev.stream_id]][1].extend(v if isinstance(v, bytes) else cbor2.dumps(v))
                rec.consumed(ev.stream_id)
            elif isinstance(ev, BodyEnded):
                self._tg.start_soon(
                    self._answer_peer, f.id, cap, [(u, bytes(b)) for u, b in streams]
                )
        rec.flush_credit()
        for c in rec.data_to_send():
            await self._send_quiet(c)

    def _peer_handler(self, cap: str) -> PeerHandler | None:
        """The ``peers`` callback for ``cap``: its exact text first, else the registered cap
        the runtime's own dispatch rule would pick (:func:`select_handler`)."""
        handler = self.peers.get(cap)
        if handler is not None:
            return handler
        keys = list(self.peers)
        index = select_handler(keys, cap)
        return self.peers[keys[index]] if index is not None else None

    async def _answer_peer(self, rid: MessageId, cap: str, inputs: list[tuple[str, bytes]]) -> None:
        # A closed cartridge input means there is nobody left to answer.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._answer_peer_inner(rid, cap, inputs)

    async def _answer_peer_inner(
        self, rid: MessageId, cap: str, inputs: list[tuple[str, bytes]]
    ) -> None:
        handler = self._peer_handler(cap)
        if handler is None:
            await self.send_frame(
                frames.err(
                    rid,
                    ErrorCode.NO_HANDLER,
                    f"no cartridge handles cap: {cap}",
                    AttributionClass.ENVIRONMENT,
                )
            )
            return
        try:
            reply = await handler(cap, inputs)
        except Exception as exc:
            # A typed error (OpError, CallError, anything with a ``code``) keeps its code,
            # class and arg_urn; any other exception is PEER_FAILED/internal, naming its type.
            code = getattr(exc, "code", None)
            if isinstance(code, str) and code:
                message = str(getattr(exc, "message", "") or exc)
                cls = str(getattr(exc, "attribution_class", None) or AttributionClass.INTERNAL)
                arg_urn = getattr(exc, "arg_urn", None)
            else:
                code, cls, arg_urn = "PEER_FAILED", AttributionClass.INTERNAL, None
                message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            await self.send_frame(frames.err(rid, code, message, cls, arg_urn=arg_urn))
            return
        if not isinstance(reply, PeerReply):
            reply = PeerReply(data=reply)
        streams: list[tuple[str | None, str, Any]] = [
            (None, reply.media_urn, reply.items if reply.items is not None else reply.data)
        ]
        streams += [(urn, urn, value) for urn, value in reply.outputs.items()]
        for index, (output, media_urn, value) in enumerate(streams):
            await self._send_peer_stream(rid, f"peer-resp-{index}", output, media_urn, value)
        await self.send_frame(frames.end(rid))

    async def _send_peer_stream(
        self, rid: MessageId, sid: str, output: str | None, media_urn: str, value: Any
    ) -> None:
        """One response stream: a list is a sequence (items may be :class:`Item` with meta),
        bytes or text a scalar stream cut at the chunk size."""
        is_sequence = isinstance(value, list | tuple)
        await self.send_frame(
            frames.stream_start(rid, sid, media_urn, is_sequence=is_sequence, output=output)
        )
        n = 0
        if is_sequence:
            for item in value:
                item_value, meta = split_item(item)
                await self.send_frame(frames.chunk(rid, sid, n, cbor2.dumps(item_value), meta=meta))
                n += 1
        else:
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            step = self.limits.effective_chunk
            for pos in range(0, len(data), step):
                piece = cbor2.dumps(data[pos : pos + step])
                await self.send_frame(frames.chunk(rid, sid, n, piece))
                n += 1
        await self.send_frame(frames.stream_end(rid, sid, n))


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
