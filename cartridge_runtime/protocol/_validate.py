"""Per-frame-type validation applied to every decoded frame (TYP-*, ERR-*, REQ-*).

The codec calls :func:`validate_frame` after building a :class:`Frame`; it checks the keys
each type needs and the meta fields whose values the protocol constrains. Rules about order
(which frame may follow which) live in the request state machine, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._constants import AttributionClass, FrameType, NetworkPolicy
from ._errors import FrameDecodeError
from ._frame import Frame

ATTRIBUTION_CLASSES = frozenset(c.value for c in AttributionClass)
POLICY_WORDS = frozenset(p.value for p in NetworkPolicy)


def _need(frame: Frame, attr: str, key: int) -> None:
    if getattr(frame, attr) is None:
        raise FrameDecodeError(f"{frame.frame_type.name} frame requires key {key} ({attr})")


def _text(
    meta: Mapping[str, Any], name: str, frame: Frame, *, required: bool, non_empty: bool
) -> None:
    v = meta.get(name)
    if v is None:
        if required:
            raise FrameDecodeError(f"{frame.frame_type.name} meta requires '{name}'")
        return
    if type(v) is not str:
        raise FrameDecodeError(f"{frame.frame_type.name} meta '{name}' must be text")
    if non_empty and not v:
        raise FrameDecodeError(f"{frame.frame_type.name} meta '{name}' must not be empty")


def _attribution(meta: Mapping[str, Any], frame: Frame, *, required: bool) -> None:
    v = meta.get("attribution_class")
    if v is None:
        if required:
            raise FrameDecodeError(f"{frame.frame_type.name} meta requires 'attribution_class'")
        return
    if type(v) is not str or v not in ATTRIBUTION_CLASSES:  # type first: v may be unhashable
        raise FrameDecodeError(
            f"{frame.frame_type.name} meta attribution_class {v!r} is not one of "
            + ", ".join(sorted(ATTRIBUTION_CLASSES))
        )


def _meta(frame: Frame, *, required: bool) -> Mapping[str, Any]:
    if frame.meta is None:
        if required:
            raise FrameDecodeError(f"{frame.frame_type.name} frame requires meta (key 5)")
        return {}
    return frame.meta


def _plain_attributed(meta: Any) -> bool:
    """True when ``meta`` certainly passes the ERR / non-progress LOG rules for
    attribution_class, message and arg_urn (the common case, checked without calls)."""
    ac = meta.get("attribution_class")
    msg = meta.get("message")
    arg = meta.get("arg_urn")
    return (
        type(ac) is str
        and ac in ATTRIBUTION_CLASSES
        and (msg is None or type(msg) is str)
        and (arg is None or (type(arg) is str and arg != ""))
    )


def _check_err(frame: Frame) -> None:
    meta = frame.meta
    if meta is not None:
        code = meta.get("code")
        if type(code) is str and code and _plain_attributed(meta):
            return
    meta = _meta(frame, required=True)
    _text(meta, "code", frame, required=True, non_empty=True)
    _attribution(meta, frame, required=True)
    _text(meta, "message", frame, required=False, non_empty=False)
    _text(meta, "arg_urn", frame, required=False, non_empty=True)


def _check_log(frame: Frame) -> None:
    meta = frame.meta
    if meta is not None:
        level = meta.get("level")
        if type(level) is str and level and level != "progress" and _plain_attributed(meta):
            return
    meta = _meta(frame, required=True)
    _text(meta, "level", frame, required=True, non_empty=True)
    _text(meta, "message", frame, required=False, non_empty=False)
    if meta["level"] == "progress":
        p = meta.get("progress")
        if type(p) not in (float, int):
            raise FrameDecodeError("progress LOG meta requires a numeric 'progress'")
    else:
        _attribution(meta, frame, required=True)
        _text(meta, "arg_urn", frame, required=False, non_empty=True)


def _check_end(frame: Frame) -> None:
    meta = frame.meta
    if meta is None:
        return
    ec = meta.get("exit_code")
    if ec is not None and type(ec) is not int:
        raise FrameDecodeError("END meta 'exit_code' must be an integer")
    p = meta.get("progress")
    if p is not None and type(p) is not float and type(p) is not int:
        raise FrameDecodeError("END meta 'progress' must be a number")
    msg = meta.get("message")
    if msg is not None and type(msg) is not str:
        _text(meta, "message", frame, required=False, non_empty=False)


def _check_policy(frame: Frame) -> None:
    meta = _meta(frame, required=True)
    word = meta.get("network")
    if type(word) is not str or word not in POLICY_WORDS:  # type first: word may be unhashable
        raise FrameDecodeError(
            f"POLICY network {word!r} is not one of " + ", ".join(sorted(POLICY_WORDS))
        )


def _check_hello(frame: Frame) -> None:
    _meta(frame, required=True)


def _check_stream_start(frame: Frame) -> None:
    _need(frame, "stream_id", 11)
    _need(frame, "media_urn", 12)


def _check_chunk(frame: Frame) -> None:
    if frame.stream_id is not None and frame.chunk_index is not None and frame.checksum is not None:
        return  # the common case, without three calls
    _need(frame, "stream_id", 11)
    _need(frame, "chunk_index", 14)
    _need(frame, "checksum", 16)


def _check_stream_end(frame: Frame) -> None:
    _need(frame, "stream_id", 11)


def _check_credit(frame: Frame) -> None:
    _need(frame, "credit", 19)


def _check_cancel(frame: Frame) -> None:
    if frame.meta is not None:
        _text(frame.meta, "code", frame, required=False, non_empty=True)
        _attribution(frame.meta, frame, required=False)
        _text(frame.meta, "message", frame, required=False, non_empty=False)


#: Frame types whose whole check above is "these fields are present": the compiled codec
#: tests presence itself and calls the check only to name a failure (kept beside the checks
#: so the two cannot drift; a test holds them together).
PRESENCE_CHECKED: dict[FrameType, tuple[str, ...]] = {
    FrameType.STREAM_START: ("stream_id", "media_urn"),
    FrameType.CHUNK: ("stream_id", "chunk_index", "checksum"),
    FrameType.STREAM_END: ("stream_id",),
    FrameType.CREDIT: ("credit",),
}

#: Frame type -> its check (the codec calls these directly on its hot path).
TYPE_CHECKS = {
    FrameType.HELLO: _check_hello,
    FrameType.ERR: _check_err,
    FrameType.LOG: _check_log,
    FrameType.END: _check_end,
    FrameType.POLICY: _check_policy,
    FrameType.STREAM_START: _check_stream_start,
    FrameType.CHUNK: _check_chunk,
    FrameType.STREAM_END: _check_stream_end,
    FrameType.CREDIT: _check_credit,
    FrameType.CANCEL: _check_cancel,
}


def validate_frame(frame: Frame) -> None:
    """Check the keys and meta ``frame``'s type requires.

    :raises FrameDecodeError: a required key or meta field is missing or invalid.
    """
    check = TYPE_CHECKS.get(frame.frame_type)
    if check is not None:
        check(frame)
