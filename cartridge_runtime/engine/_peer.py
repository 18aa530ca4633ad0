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

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol import ErrorCode, Frame, FrameType, MessageId, ProtocolError, frames
from ._errors import CallError

if TYPE_CHECKING:
    from ._conn import Connection

#: Where a peer call goes: ``await target(cap)`` is a ready connection (the least-loaded
#: replica of the cartridge that serves ``cap``) and the handler cap there.
#: Raises :class:`CallError` (no route, a start-up that failed).
PeerTarget = Callable[[str], Awaitable[tuple["Connection", str]]]


class PeerLink:
    """One peer call in flight (internal)."""

    def __init__(self, target: PeerTarget, origin: Connection, req: Frame) -> None:
        self._find_target = target
        self.origin = origin
        self.orig_rid = req.id
        self.orig_xid = req.routing_id
        self.cap = req.cap or ""
        self.rid = MessageId.new()
        self.xid: MessageId | None = None
        self.target: Connection | None = None
        self.buffer: list[Frame] = []
        self.done = False
        self._chain: Any = None
        origin.peer_in[self.orig_rid] = self

    async def connect(self) -> None:
        """Route, start the target if needed, take a pool slot, then send the REQ."""
        try:
            if not self.cap:
                raise CallError(ErrorCode.INVALID_REQUEST, "internal", "peer REQ without a cap")
            conn, handler = await self._find_target(self.cap)
            chain = await conn.gate.acquire(handler)
        except CallError as exc:
            self._error_to_origin(exc)
            return
        if self.done or conn.state != "ready":
            conn.gate.release(chain)
            if not self.done:
                self._error_to_origin(
                    conn.death
                    or CallError(
                        ErrorCode.CARTRIDGE_DIED, "environment", f"cartridge {conn.name} died"
                    )
                )
            return
        self._chain = chain
        self.target = conn
        self.xid = conn.next_xid()
        conn.calls[self.rid] = self
        conn.send(frames.req(self.rid, self.cap, xid=self.xid))
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
                self._error_to_origin(
                    CallError(
                        meta.get("code") or ErrorCode.CANCELLED,
                        meta.get("attribution_class") or "internal",
                        meta.get("message") or "Request cancelled",
                    )
                )
                return
            self.buffer.append(frame)
            return
        self._forward(self.target, frame.replace(id=self.rid, routing_id=self.xid))

    def on_origin_death(self) -> None:
        if self.done:
            return
        if self.target is not None:
            self.target.send(
                frames.cancel(
                    self.rid,
                    code=ErrorCode.ABORTED,
                    attribution_class="environment",
                    message=f"the calling cartridge {self.origin.name} died",
                    xid=self.xid,
                )
            )
        self._close()

    # -- from the target -------------------------------------------------------------------

    @property
    def _xid(self) -> MessageId | None:
        return self.xid

    def on_frame(self, frame: Frame) -> None:
        if self.done:
            self.origin.counters.stragglers += 1
            return
        self._forward(self.origin, frame.replace(id=self.orig_rid, routing_id=self.orig_xid))
        if frame.frame_type.is_terminal:
            self._close()

    def on_death(self, error: CallError) -> None:
        if not self.done:
            self._error_to_origin(error)

    # -- helpers ---------------------------------------------------------------------------

    def _forward(self, conn: Connection, frame: Frame) -> None:
        try:
            conn.send(frame)
        except ProtocolError as exc:
            # A frame the other side's limits cannot carry: fail the peer call both ways.
            if self.target is not None:
                self.target.send(
                    frames.cancel(
                        self.rid,
                        code=ErrorCode.PROTOCOL_ERROR,
                        attribution_class="internal",
                        message=str(exc),
                        xid=self.xid,
                    )
                )
            self._error_to_origin(
                CallError(
                    ErrorCode.PROTOCOL_ERROR, "internal", f"peer call could not be forwarded: {exc}"
                )
            )

    def _error_to_origin(self, error: CallError) -> None:
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
        self._close()

    def _close(self) -> None:
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
        link._close()
        raise
