"""The grow-graph cap, answered by the engine itself (GRW-10 .. GRW-14).

A cartridge grows the graph its call runs in with a peer REQ to :data:`GROW_GRAPH_CAP`. The
engine does not route it: a :class:`GrowRequest` takes the request body from the origin (a
:class:`~cartridge_runtime.protocol.BodyReceiver` checks it and grants credit), finds the graph
call it grows from (``"parent"``, else the one graph call that connection serves), checks every
cap the batch instantiates can be routed, applies the batch whole or not at all, and answers
``{"results": [...]}`` on one stream, or ERR ``GRAPH_REFUSED`` (class ``input``) naming the op.

:class:`~._hub.GrowHub` knows which calls run inside which graph: a graph's runner registers
each node's call (its request id and connection) while it runs.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio

from ...graph import GRAPH_RESULTS_MEDIA, GROW_GRAPH_CAP, GraphRefused, Refusal, parse_batch
from ...protocol import (
    AttributionClass,
    BodyEnded,
    BodyReceiver,
    CreditDirection,
    ErrorCode,
    ErrorReport,
    Frame,
    FrameType,
    ProtocolError,
    StreamData,
    frames,
    scalar_payloads,
)
from ...urn import CapUrn, UrnError
from .._errors import CallError
from ._hub import GrowHub

__all__ = ("GrowRequest", "is_grow_cap")

_GROW: Final = CapUrn.parse(GROW_GRAPH_CAP)
_MAX_BATCH_BYTES: Final = 64 * 1024 * 1024


def is_grow_cap(cap: str | None) -> bool:
    """Whether a peer REQ names the grow-graph cap (any spelling of it)."""
    if not cap or "grow-graph" not in cap:
        return False
    try:
        return CapUrn.parse(cap).is_equivalent(_GROW)
    except UrnError:
        return False


class GrowRequest:
    """One grow-graph peer request (a :class:`PeerOrigin` of its connection)."""

    def __init__(
        self,
        hub: GrowHub,
        origin: Any,
        req: Frame,
        resolve: Callable[[str], Awaitable[Any]],
    ) -> None:
        self._hub = hub
        self._origin = origin
        self._rid = req.id
        self._xid = req.routing_id
        self._resolve = resolve
        self._receiver = BodyReceiver(
            req.id,
            xid=req.routing_id,
            initial_credit=origin.limits.initial_credit,
            expect_req=False,
            credit_dir=CreditDirection.REQUEST,
        )
        self._body: list[bytes] = []
        self._size = 0
        self._ended = anyio.Event()
        self._error: ErrorReport | None = None
        self.done = False
        origin.add_origin(req.id, self)

    # -- PeerOrigin --------------------------------------------------------------------------

    def on_requester_frame(self, frame: Frame) -> None:
        if self.done or self._ended.is_set():
            return
        if frame.frame_type is FrameType.CANCEL:
            self._finish_err(ErrorCode.CANCELLED, "Request cancelled", AttributionClass.USER)
            return
        try:
            events = self._receiver.receive(frame)
        except ProtocolError as exc:
            self._finish_err(ErrorCode.PROTOCOL_ERROR, str(exc), AttributionClass.INTERNAL)
            return
        for ev in events:
            if isinstance(ev, StreamData):
                value = ev.value
                piece = value.encode() if isinstance(value, str) else bytes(value)
                self._size += len(piece)
                if self._size > _MAX_BATCH_BYTES:
                    self._finish_err(
                        ErrorCode.GRAPH_REFUSED, "the batch is too large", AttributionClass.INPUT
                    )
                    return
                self._body.append(piece)
                self._receiver.consumed(ev.stream_id)
            elif isinstance(ev, BodyEnded):
                self._ended.set()
        for credit in self._receiver.data_to_send():
            self._origin.send(credit)

    def on_origin_death(self) -> None:
        self.done = True
        self._ended.set()

    # -- the answer ------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Wait for the body, apply it, answer; never raises into the engine."""
        await self._ended.wait()
        if self.done:
            return
        try:
            batch = parse_batch(b"".join(self._body))
            graph, node = self._hub.find(self._origin, batch.parent)
            for index, op in enumerate(batch.ops):
                if op.cap is not None:
                    try:
                        await self._resolve(op.cap)
                    except CallError as exc:
                        raise GraphRefused(
                            Refusal.NO_CAP, f"nobody serves {op.cap}: {exc.message}", index
                        ) from None
            if self.done:
                return
            results = graph.grow(batch, made_by=node)
        except GraphRefused as exc:
            self._finish_err(ErrorCode.GRAPH_REFUSED, exc.message, AttributionClass.INPUT)
            return
        except Exception as exc:  # a fault of ours: the cartridge gets an ERR, the engine runs on
            self._finish_err(
                ErrorCode.HANDLER_ERROR,
                f"the engine could not grow the graph: {type(exc).__name__}",
                AttributionClass.INTERNAL,
            )
            return
        payload = json.dumps({"results": results}).encode("utf-8")
        self._answer(payload)

    def _answer(self, payload: bytes) -> None:
        rid, xid, send = self._rid, self._xid, self._origin.send
        send(frames.stream_start(rid, "results", GRAPH_RESULTS_MEDIA, xid=xid))
        pieces = scalar_payloads(payload, self._origin.limits.effective_chunk)
        for index, piece in enumerate(pieces):
            send(frames.chunk(rid, "results", index, piece, xid=xid))
        send(frames.stream_end(rid, "results", len(pieces), xid=xid))
        send(frames.end(rid, xid=xid))
        self._close()

    def _finish_err(self, code: str, message: str, klass: str) -> None:
        if self.done:
            return
        self._origin.send(frames.err(self._rid, code, message, klass, xid=self._xid))
        self._close()

    def _close(self) -> None:
        self.done = True
        self._ended.set()
        self._origin.forget(self._rid)


async def run_grow_request(request: GrowRequest) -> None:
    """Task body of one growth request."""
    await request.serve()
