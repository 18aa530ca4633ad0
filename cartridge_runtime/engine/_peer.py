"""Peer calls: a REQ a cartridge sends is routed to whichever cartridge provides the cap.

A :class:`PeerLink` joins the requesting cartridge (the *origin*, which chose rid ``P`` and
maybe an xid) to the serving cartridge (the *target*). Toward the target the engine uses a
fresh rid and its own small-uint xid, exactly as for its own calls, so a cartridge calling
itself never sees one rid used both ways. Frames are forwarded with only id, xid (and seq,
renumbered by each link's writer) rewritten; payloads are never copied:

* origin -> target: the request body (STREAM_*, CHUNK, END), CREDIT (``credit_dir:
  response``), CANCEL;
* target -> origin: the response (STREAM_*, CHUNK, LOG, END/ERR) and CREDIT (``credit_dir:
  request``).

Flow control is end to end between the two cartridges; the engine only buffers what the
origin sends while the target is still starting (bounded by the origin's credit window).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import anyio

from ..protocol import (
    AttributionClass,
    ErrorCode,
    Frame,
    FrameType,
    MessageId,
    ProtocolError,
    frames,
)
from ._connection._counters import Counters
from ._connection._gate import Chain, PoolGate
from ._connection._links import Flow, PeerOrigin
from ._errors import CallError, CallTimeout

__all__ = ("OnRouted", "PeerEnd", "PeerLink", "PeerRouter", "run_peer_link")

_TERMINAL = frozenset({FrameType.END, FrameType.ERR})


class PeerEnd(Protocol):
    """What a peer link needs from a connection at either end of it."""

    @property
    def name(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    @property
    def death(self) -> CallError | None: ...

    @property
    def gate(self) -> PoolGate: ...

    @property
    def counters(self) -> Counters: ...

    def send(self, frame: Frame) -> None: ...

    def next_xid(self) -> MessageId: ...

    def add_flow(self, rid: MessageId, flow: Flow) -> None: ...

    def add_origin(self, rid: MessageId, origin: PeerOrigin) -> None: ...

    def forget(self, rid: MessageId) -> None: ...

    def hold(self) -> None:
        """Queue frames without writing them until the matching :meth:`release`."""
        ...

    def release(self) -> None:
        """End a :meth:`hold`: what was queued meanwhile leaves in one write."""
        ...

    def batch(self, other: PeerEnd) -> None:
        """Frames this end sent are about to be forwarded to ``other``: while this end's
        reader dispatches a block, hold ``other`` until the block ends (one write after it,
        no loop turn to schedule it)."""
        ...


class PeerRouter(Protocol):
    """Where peer calls go (the engine)."""

    async def peer_target(self, cap: str) -> tuple[PeerEnd, str]:
        """A ready connection that serves ``cap`` (the least-loaded replica of the cartridge
        that serves it) and the handler cap there.

        :raises CallError: no route, or a start-up that failed.
        """
        ...


#: Told when a link found its target: ``(link, target, handler cap)``.
OnRouted = Callable[["PeerLink", PeerEnd, str], None]


class PeerLink:
    """One peer call in flight (internal).

    A link can be watched for activity as a call is (the watchdog's interface:
    :attr:`activity_limit`, :attr:`silence`, :attr:`frames`, :attr:`events`, :attr:`conn`,
    :meth:`expire_inactive`); ``on_routed`` is told when the target is known, to start that.
    """

    #: Nothing waits unread in a link: frames go on as they come.
    events: tuple[()] = ()

    def __init__(
        self,
        router: PeerRouter,
        origin: PeerEnd,
        req: Frame,
        on_routed: OnRouted | None = None,
    ) -> None:
        self._router = router
        self.origin = origin
        self.orig_rid = req.id
        self.orig_xid = req.routing_id
        self.cap = req.cap or ""
        self.rid = MessageId.new()
        self.xid: MessageId | None = None
        self.target: PeerEnd | None = None
        self.buffer: list[Frame] = []
        self.done = False
        self._chain: Chain | None = None
        self._on_routed = on_routed
        #: Frames from the target so far, and the activity watch (see the class docstring).
        self.frames = 0
        self.activity_limit: float | None = None
        self.silence: Any = None
        origin.add_origin(self.orig_rid, self)

    async def connect(self) -> None:
        """Route, start the target if needed, take a pool slot, then send the REQ."""
        try:
            if not self.cap:
                raise CallError(
                    ErrorCode.INVALID_REQUEST, AttributionClass.INTERNAL, "peer REQ without a cap"
                )
            conn, handler = await self._router.peer_target(self.cap)
            chain = await conn.gate.acquire(handler)
        except CallError as exc:
            self.error_to_origin(exc)
            return
        self.join(conn, handler, chain)

    def connect_now(self, conn: PeerEnd, handler: str) -> bool:
        """Join ``conn`` (ready, serving ``handler``) at once when its pools admit the call
        without waiting: no task for the link. ``False``: nothing done, :meth:`connect`."""
        if not conn.ready or self.done:
            return False
        chain = conn.gate.try_acquire(handler)
        if chain is None:
            return False
        self.join(conn, handler, chain)
        return True

    def join(self, conn: PeerEnd, handler: str, chain: Chain) -> None:
        """Send the REQ to ``conn``, which admitted the call (``chain``), and what the origin
        sent meanwhile."""
        if self.done or not conn.ready:
            conn.gate.release(chain)
            if not self.done:
                self.error_to_origin(
                    conn.death
                    or CallError(
                        ErrorCode.CARTRIDGE_DIED,
                        AttributionClass.ENVIRONMENT,
                        f"cartridge {conn.name} died",
                    )
                )
            return
        self._chain = chain
        self.target = conn
        self.xid = conn.next_xid()
        conn.add_flow(self.rid, self)
        self.origin.batch(conn)
        conn.send(frames.req(self.rid, self.cap, xid=self.xid))
        if self._on_routed is not None:
            self._on_routed(self, conn, handler)
        buffered, self.buffer = self.buffer, []
        for frame in buffered:
            self.on_requester_frame(frame)

    # -- from the origin -------------------------------------------------------------------

    def on_requester_frame(self, frame: Frame) -> None:
        if self.done:
            self.origin.counters.stragglers += 1
            return
        if self.target is None:
            if frame.frame_type is FrameType.CANCEL:
                meta = frame.meta or {}
                self.error_to_origin(
                    CallError(
                        meta.get("code") or ErrorCode.CANCELLED,
                        meta.get("attribution_class") or AttributionClass.INTERNAL,
                        meta.get("message") or "Request cancelled",
                    )
                )
                return
            self.buffer.append(frame)
            return
        target = self.target
        self.origin.batch(target)
        try:
            target.send(frame.replace(id=self.rid, routing_id=self.xid))
        except ProtocolError as exc:
            self._not_forwarded(exc)

    def on_origin_death(self) -> None:
        if self.done:
            return
        if self.target is not None:
            self.target.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.ABORTED,
                    attribution_class=AttributionClass.ENVIRONMENT,
                    message=f"the calling cartridge {self.origin.name} died",
                    xid=self.xid,
                )
            )
        self.close()

    # -- from the target -------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        if self.done:
            self.origin.counters.stragglers += 1
            return
        self.frames += 1
        origin = self.origin
        if self.target is not None:
            self.target.batch(origin)
        try:
            origin.send(frame.replace(id=self.orig_rid, routing_id=self.orig_xid))
        except ProtocolError as exc:
            self._not_forwarded(exc)
        if frame.frame_type in _TERMINAL:
            self.close()

    def on_death(self, error: CallError) -> None:
        if not self.done:
            self.error_to_origin(error)

    # -- the activity watch ----------------------------------------------------------------

    @property
    def conn(self) -> PeerEnd:
        """The end serving the call (the origin until a target is known)."""
        return self.target if self.target is not None else self.origin

    def expire_inactive(self, limit: float) -> None:
        """The target sent no frame for ``limit`` seconds: cancel it there (``TIMEOUT``) and
        fail the call toward its origin with :class:`CallTimeout`, as a call of the engine's
        own is failed."""
        if self.done:
            return
        reason = f"no activity for {limit:g} s"
        if self.target is not None:
            self.target.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.TIMEOUT,
                    attribution_class=AttributionClass.RESOURCE,
                    message=reason,
                    xid=self.xid,
                )
            )
        self.error_to_origin(
            CallTimeout(
                f"the call to {self.cap} timed out: {reason} "
                f"(cartridge {self.conn.name} sent no frame for it)"
            )
        )

    # -- helpers ---------------------------------------------------------------------------

    def _not_forwarded(self, exc: ProtocolError) -> None:
        """A frame the other side's limits cannot carry: fail the peer call both ways."""
        if self.target is not None:
            self.target.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.PROTOCOL_ERROR,
                    attribution_class=AttributionClass.INTERNAL,
                    message=str(exc),
                    xid=self.xid,
                )
            )
        self.error_to_origin(
            CallError(
                ErrorCode.PROTOCOL_ERROR,
                AttributionClass.INTERNAL,
                f"peer call could not be forwarded: {exc}",
            )
        )

    def error_to_origin(self, error: CallError) -> None:
        """Fail the peer call toward its origin with ``error`` (an ERR) and end the link."""
        if self.done:
            return
        self.origin.send(
            frames.err(
                self.orig_rid,
                error.code,
                error.message,
                error.attribution_class,
                arg_urn=error.arg_urn,
                xid=self.orig_xid,
            )
        )
        self.close()

    def close(self) -> None:
        """End the link: unroute it at both ends and free the target's pool slot."""
        if self.done:
            return
        self.done = True
        self.buffer.clear()
        self.origin.forget(self.orig_rid)
        if self.target is not None:
            self.target.forget(self.rid)
            if self._chain is not None:
                self.target.gate.release(self._chain)
                self._chain = None


async def run_peer_link(link: PeerLink) -> None:
    """Task body: connect the link; never raises into the engine's task group."""
    try:
        await link.connect()
    except anyio.get_cancelled_exc_class():
        link.close()
        raise
