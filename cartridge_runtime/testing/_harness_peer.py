"""The harness's fake peers: what the ``peers={cap: handler}`` callbacks answer when the
cartridge under test makes a peer call, and the request being gathered for one.

The engine's connection routes the peer call here (its :class:`PeerRequest` event, then the
request's frames by request id to a :class:`HarnessPeerCall`, the connection's ``PeerOrigin``); once
the request ended, the callback's reply (or its typed error) goes back as response frames.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import cbor2

from cartridge_runtime._redact import describe, describe_meta
from cartridge_runtime.protocol import (
    AttributionClass,
    BodyEnded,
    BodyReceiver,
    ErrorCode,
    Frame,
    Limits,
    MessageId,
    StreamData,
    StreamItem,
    StreamOpened,
    frames,
)
from cartridge_runtime.urn import select_handler

from ._harness_call import split_item

__all__ = ("HarnessPeerCall", "PeerHandler", "PeerReply", "answer_peer", "pick_peer")


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


def pick_peer(peers: Mapping[str, PeerHandler], cap: str) -> PeerHandler | None:
    """The callback for ``cap``: its exact text first, else the registered cap the runtime's
    own dispatch rule would pick (:func:`select_handler`)."""
    handler = peers.get(cap)
    if handler is not None:
        return handler
    keys = list(peers)
    index = select_handler(keys, cap)
    return peers[keys[index]] if index is not None else None


class HarnessPeerCall:
    """One peer call of the cartridge, gathered from its frames (a connection's
    ``PeerOrigin``): each argument's bytes by media URN; ``on_ended`` runs once its END came.

    :param req: the REQ frame that opened it.
    :param limits: the negotiated limits (the credit this side grants).
    :param send: queues a frame to the cartridge (CREDIT for its arguments).
    :param on_ended: told ``(rid, cap, inputs)`` once the request ended.
    """

    def __init__(
        self,
        req: Frame,
        limits: Limits,
        send: Callable[[Frame], None],
        on_ended: Callable[[MessageId, str, list[tuple[str, bytes]]], None],
    ) -> None:
        self.rid = req.id
        self.cap = req.cap or ""
        self._receiver = BodyReceiver(req.id, initial_credit=limits.initial_credit, expect_req=True)
        self._receiver.receive(req)
        self._streams: list[tuple[str, bytearray]] = []
        self._ids: dict[str, int] = {}
        self._send = send
        self._on_ended = on_ended

    def on_requester_frame(self, frame: Frame) -> None:
        if not frame.frame_type.is_flow:
            return  # a grant for the response streams: they are sent without waiting
        rec = self._receiver
        streams = self._streams
        for ev in rec.receive(frame):
            if isinstance(ev, StreamOpened):
                self._ids[ev.stream_id] = len(streams)
                streams.append((ev.media_urn, bytearray()))
            elif isinstance(ev, (StreamData, StreamItem)):
                v = ev.value
                streams[self._ids[ev.stream_id]][1].extend(
                    v if isinstance(v, bytes) else cbor2.dumps(v)
                )
                rec.consumed(ev.stream_id)
            elif isinstance(ev, BodyEnded):
                self._on_ended(self.rid, self.cap, [(u, bytes(b)) for u, b in streams])
        rec.flush_credit()
        for c in rec.data_to_send():
            self._send(c)

    def on_origin_death(self) -> None:
        """The cartridge ended: nobody is left to answer."""


async def answer_peer(
    handler: PeerHandler | None,
    rid: MessageId,
    cap: str,
    inputs: list[tuple[str, bytes]],
    chunk: int,
) -> list[Frame]:
    """The frames answering one peer call: the callback's reply as response streams then
    END, or ERR (``NO_HANDLER`` when no callback matches; a typed error keeps its code, class
    and ``arg_urn``; any other exception is ``PEER_FAILED``/internal naming its type)."""
    if handler is None:
        return [
            frames.err(
                rid,
                ErrorCode.NO_HANDLER,
                f"no cartridge handles cap: {cap}",
                AttributionClass.ENVIRONMENT,
            )
        ]
    try:
        reply = await handler(cap, inputs)
    except Exception as exc:
        code = getattr(exc, "code", None)
        if isinstance(code, str) and code:
            message = str(getattr(exc, "message", "") or exc)
            cls = str(getattr(exc, "attribution_class", None) or AttributionClass.INTERNAL)
            arg_urn = getattr(exc, "arg_urn", None)
        else:
            code, cls, arg_urn = ErrorCode.PEER_FAILED, AttributionClass.INTERNAL, None
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return [frames.err(rid, code, message, cls, arg_urn=arg_urn)]
    if not isinstance(reply, PeerReply):
        reply = PeerReply(data=reply)
    streams: list[tuple[str | None, str, Any]] = [
        (None, reply.media_urn, reply.items if reply.items is not None else reply.data)
    ]
    streams += [(urn, urn, value) for urn, value in reply.outputs.items()]
    out: list[Frame] = []
    for index, (output, media_urn, value) in enumerate(streams):
        out += _stream(rid, f"peer-resp-{index}", output, media_urn, value, chunk)
    out.append(frames.end(rid))
    return out


def _stream(
    rid: MessageId, sid: str, output: str | None, media_urn: str, value: Any, chunk: int
) -> list[Frame]:
    """One response stream: a list is a sequence (items may be :class:`Item` with meta),
    bytes or text a scalar stream cut at the chunk size."""
    is_sequence = isinstance(value, list | tuple)
    out = [frames.stream_start(rid, sid, media_urn, is_sequence=is_sequence, output=output)]
    n = 0
    if is_sequence:
        for item in value:
            item_value, meta = split_item(item)
            out.append(frames.chunk(rid, sid, n, cbor2.dumps(item_value), meta=meta))
            n += 1
    else:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        for pos in range(0, len(data), chunk):
            out.append(frames.chunk(rid, sid, n, cbor2.dumps(data[pos : pos + chunk])))
            n += 1
    out.append(frames.stream_end(rid, sid, n))
    return out
