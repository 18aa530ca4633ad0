"""Constructors for each frame type, with meta in the reference's key order.

These are plain functions returning :class:`Frame` values; ``seq`` is left at 0 and is set
by whoever numbers the flow (:class:`SeqAssigner`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._checksum import checksum as _checksum
from ._constants import (
    PROTOCOL_VERSION,
    REQ_CONTENT_TYPE,
    AttributionClass,
    FrameType,
    NetworkPolicy,
)
from ._events import ErrorReport, err_meta
from ._frame import ZERO_ID, Frame, MessageId, _from_fields
from ._limits import Limits

_STREAM_START = FrameType.STREAM_START
_CHUNK = FrameType.CHUNK
_STREAM_END = FrameType.STREAM_END
_END = FrameType.END


def hello(limits: Limits, *, manifest: bytes | None = None, pools: bytes | None = None) -> Frame:
    """HELLO: the four limits, ``version: 6``, and for a cartridge its manifest and pools."""
    meta: dict[str, Any] = limits.to_meta()
    meta["version"] = 6
    if manifest is not None:
        meta["manifest"] = manifest
    if pools is not None:
        meta["pools"] = pools
    return Frame(frame_type=FrameType.HELLO, id=ZERO_ID, meta=meta)


def req(rid: MessageId, cap: str, *, xid: MessageId | None = None, seq: int = 0) -> Frame:
    """REQ calling ``cap``: empty payload, CBOR content type (REQ-1)."""
    return Frame(
        frame_type=FrameType.REQ,
        id=rid,
        seq=seq,
        content_type=REQ_CONTENT_TYPE,
        payload=b"",
        cap=cap,
        routing_id=xid,
    )


def stream_start(
    rid: MessageId,
    stream_id: str,
    media_urn: str,
    *,
    xid: MessageId | None = None,
    is_sequence: bool | None = None,
    unbounded: bool | None = None,
    output: str | None = None,
    meta: Mapping[str, Any] | None = None,
    seq: int = 0,
) -> Frame:
    # Built as the frame's field dict in wire-key order (see _frame.Frame): the hot builders
    # skip Frame.__init__'s two dozen keyword defaults.
    d: dict[str, Any] = {"version": PROTOCOL_VERSION, "frame_type": _STREAM_START, "id": rid}
    d["seq"] = seq
    if meta is not None:
        d["meta"] = meta
    d["stream_id"] = stream_id
    d["media_urn"] = media_urn
    if xid is not None:
        d["routing_id"] = xid
    if is_sequence is not None:
        d["is_sequence"] = is_sequence
    if unbounded:
        d["unbounded"] = True
    if output is not None:
        d["output"] = output
    return _from_fields(d)


def chunk(
    rid: MessageId,
    stream_id: str,
    index: int,
    payload: bytes,
    *,
    xid: MessageId | None = None,
    meta: Mapping[str, Any] | None = None,
    seq: int = 0,
    checksum: int | None = None,
) -> Frame:
    """CHUNK carrying ``payload`` exactly as given, with its FNV-1a 64 checksum (``checksum``,
    when the caller already holds it for exactly these bytes: a verified chunk forwarded)."""
    d: dict[str, Any] = {"version": PROTOCOL_VERSION, "frame_type": _CHUNK, "id": rid}
    d["seq"] = seq
    if meta is not None:
        d["meta"] = meta
    d["payload"] = payload
    d["stream_id"] = stream_id
    if xid is not None:
        d["routing_id"] = xid
    d["chunk_index"] = index
    d["checksum"] = _checksum(payload) if checksum is None else checksum
    return _from_fields(d)


def stream_end(
    rid: MessageId,
    stream_id: str,
    chunk_count: int | None,
    *,
    xid: MessageId | None = None,
    seq: int = 0,
) -> Frame:
    """STREAM_END; ``chunk_count`` is ``None`` for unbounded streams (FLW-*)."""
    d: dict[str, Any] = {"version": PROTOCOL_VERSION, "frame_type": _STREAM_END, "id": rid}
    d["seq"] = seq
    d["stream_id"] = stream_id
    if xid is not None:
        d["routing_id"] = xid
    if chunk_count is not None:
        d["chunk_count"] = chunk_count
    return _from_fields(d)


def end(
    rid: MessageId,
    *,
    xid: MessageId | None = None,
    response: bool = True,
    progress: float = 1.0,
    message: str | None = None,
    seq: int = 0,
) -> Frame:
    """END. A response END carries ``{exit_code: 0, progress[, message]}``; a requester's has no meta."""
    meta: dict[str, Any] | None = None
    if response:
        meta = {"exit_code": 0, "progress": float(progress)}
        if message is not None:
            meta["message"] = message
    d: dict[str, Any] = {"version": PROTOCOL_VERSION, "frame_type": _END, "id": rid, "seq": seq}
    if meta is not None:
        d["meta"] = meta
    d["eof"] = True
    if xid is not None:
        d["routing_id"] = xid
    return _from_fields(d)


def err(
    rid: MessageId,
    code: str,
    message: str,
    attribution_class: str = AttributionClass.INTERNAL,
    *,
    arg_urn: str | None = None,
    xid: MessageId | None = None,
    seq: int = 0,
) -> Frame:
    """ERR with meta ``{code, attribution_class, message[, arg_urn]}`` (REQ-30, ERR-1)."""
    meta = err_meta(code, attribution_class, message, arg_urn)
    return Frame(frame_type=FrameType.ERR, id=rid, seq=seq, meta=meta, routing_id=xid)


def err_for(
    rid: MessageId, report: ErrorReport, *, xid: MessageId | None = None, seq: int = 0
) -> Frame:
    """The ERR that carries ``report`` (as given: see :meth:`ErrorReport.for_sending`)."""
    return Frame(frame_type=FrameType.ERR, id=rid, seq=seq, meta=report.to_meta(), routing_id=xid)


def log(
    rid: MessageId,
    level: str,
    message: str,
    attribution_class: str = AttributionClass.INTERNAL,
    *,
    arg_urn: str | None = None,
    xid: MessageId | None = None,
    seq: int = 0,
    data: Any = None,
) -> Frame:
    """A non-progress LOG: ``{level, attribution_class, message[, arg_urn]}``; ``data``, when
    given, goes under the meta key named by the level (``metric``, ``trace``: REQ-39)."""
    meta: dict[str, Any] = {
        "level": level,
        "attribution_class": str(attribution_class),
        "message": message,
    }
    if arg_urn:
        meta["arg_urn"] = arg_urn
    if data is not None:
        meta[level] = data
    return Frame(frame_type=FrameType.LOG, id=rid, seq=seq, meta=meta, routing_id=xid)


def progress(
    rid: MessageId,
    fraction: float,
    message: str = "",
    *,
    xid: MessageId | None = None,
    seq: int = 0,
    indeterminate: bool = False,
) -> Frame:
    """A progress LOG: ``{level: "progress", message, progress}``, no attribution class.

    ``indeterminate`` adds ``indeterminate: true`` (work goes on, how far is unknown: a
    spinner, not a percentage); ``progress`` then repeats the last fraction reported, so a
    receiver that does not know the key still reads a valid progress LOG (REQ-34).
    """
    meta: dict[str, Any] = {"level": "progress", "message": message, "progress": float(fraction)}
    if indeterminate:
        meta["indeterminate"] = True
    return Frame(frame_type=FrameType.LOG, id=rid, seq=seq, meta=meta, routing_id=xid)


def heartbeat(hid: MessageId, *, meta: Mapping[str, Any] | None = None) -> Frame:
    return Frame(frame_type=FrameType.HEARTBEAT, id=hid, meta=meta)


def cancel(
    rid: MessageId,
    *,
    force_kill: bool = False,
    code: str | None = None,
    attribution_class: str | None = None,
    message: str | None = None,
    xid: MessageId | None = None,
) -> Frame:
    """CANCEL of request ``rid``; meta only when a reason is given (FLW-*)."""
    meta: dict[str, Any] | None = None
    if code is not None or attribution_class is not None or message is not None:
        meta = {}
        if code is not None:
            meta["code"] = code
        if attribution_class is not None:
            meta["attribution_class"] = str(attribution_class)
        if message is not None:
            meta["message"] = message
    return Frame(
        frame_type=FrameType.CANCEL, id=rid, meta=meta, routing_id=xid, force_kill=force_kill
    )


def credit(
    rid: MessageId,
    amount: int,
    direction: str,
    *,
    stream_id: str | None = None,
    xid: MessageId | None = None,
) -> Frame:
    """CREDIT granting ``amount`` chunks on ``stream_id``; ``direction`` is request/response."""
    return Frame(
        frame_type=FrameType.CREDIT,
        id=rid,
        meta={"credit_dir": str(direction)},
        stream_id=stream_id,
        routing_id=xid,
        credit=amount,
    )


def close_stream(
    rid: MessageId, *, stream_id: str | None = None, xid: MessageId | None = None
) -> Frame:
    return Frame(frame_type=FrameType.CLOSE_STREAM, id=rid, stream_id=stream_id, routing_id=xid)


def policy(network: NetworkPolicy | str) -> Frame:
    """POLICY with ``{network: word}``, id 0."""
    return Frame(
        frame_type=FrameType.POLICY, id=ZERO_ID, meta={"network": str(NetworkPolicy(network))}
    )
