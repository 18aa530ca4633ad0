"""The frame audit: every frame a target writes, in every check, judged against the
structural rules (11.3 of the spec). Findings are filed under the rule id they break, so the
audit checks (seq, routing id, checksum, chunk index/count, payload shape, END/ERR/LOG meta,
terminal discipline, size limits) each report only their own rule.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import cbor2

from ..protocol import ATTRIBUTION_CLASSES, Frame, FrameType, MessageId, checksum

if TYPE_CHECKING:
    from ._context import Conn, RunState

__all__ = ("audit_conn",)


@attrs.define
class _Stream:
    start: Frame
    chunks: int = 0
    buf: bytearray = attrs.field(factory=bytearray)
    closed: bool = False


#: Frame types whose meta the audit judges rule by rule (so a strict-decoder refusal of
#: them is not also filed under TYP-4).
_META_JUDGED = frozenset(
    {FrameType.END, FrameType.ERR, FrameType.LOG, FrameType.HELLO, FrameType.HEARTBEAT}
)


def _one_item(data: bytes) -> tuple[int, bool]:
    """(bytes used by the first CBOR item, complete?). Raises ValueError if not CBOR."""
    fp = io.BytesIO(data)
    try:
        cbor2.CBORDecoder(fp).decode()
    except cbor2.CBORDecodeEOF:
        return 0, False
    except Exception as exc:
        raise ValueError(str(exc)) from exc
    return fp.tell(), True


def _data_len(payload: bytes) -> int:
    """Data bytes of a scalar chunk: the string's contents, else the whole payload."""
    fp = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(fp).decode()
    except Exception:
        return len(payload)
    if fp.tell() == len(payload) and isinstance(value, (bytes, str)):
        return len(value.encode() if isinstance(value, str) else value)
    return len(payload)


def audit_conn(conn: Conn, run: RunState, where: str, skip: frozenset[str] = frozenset()) -> None:
    """Audit everything one connection's target wrote; file findings in ``run``
    (except those under the rules in ``skip``)."""
    s = conn.session
    received = s.snapshot()

    def add(rule: str, detail: str) -> None:
        if rule not in skip:
            run.add(rule, detail)

    if s.decode_error:
        add("FRM-2", f"{where}: {s.decode_error}")
    if s.stdout_text:
        first = s.stdout_text[0].rstrip("\r\n")
        more = f" (+{len(s.stdout_text) - 1} more lines)" if len(s.stdout_text) > 1 else ""
        add("FRM-25", f"{where}: text on stdout before the first frame: {first!r}{more}")
    limits = conn.limits
    max_frame = limits.max_frame
    max_chunk = limits.max_chunk
    requests = conn.requests
    seqs: dict[tuple[MessageId, MessageId | None], int] = {}
    ended: set[MessageId] = set()
    streams: dict[tuple[MessageId, str], _Stream] = {}
    hellos = 0
    peer: set[MessageId] = set()  # requests the cartridge itself opened (peer calls)
    for rec in received:
        f = rec.frame
        ft = f.frame_type
        tag = f"{where}: {ft.name} #{rec.index}"
        if rec.invalid and ft not in _META_JUDGED:
            add("TYP-4", f"{tag}: {rec.invalid}")
        for rule, detail in rec.form:  # byte form (FRM-17..19), judged as the frame arrived
            add(rule, f"{tag}: {detail}")
        if rec.body_len > max_frame and hellos:
            add("FRM-14", f"{tag} body {rec.body_len} B > max_frame {max_frame}")
        if ft is FrameType.HELLO:
            hellos += 1
            if hellos > 1:
                add("TYP-11", f"{tag}: a second HELLO")
            continue
        if ft in (FrameType.RELAY_NOTIFY, FrameType.RELAY_STATE, FrameType.POLICY):
            add("TYP-11", f"{tag}: a cartridge never sends {ft.name}")
        if not ft.is_flow:
            if f.seq != 0:
                add("TYP-6", f"{tag} has seq {f.seq}, non-flow frames carry 0")
            if ft is FrameType.CREDIT and f.id in requests:
                if f.routing_id != requests[f.id]:
                    add("REQ-5", f"{tag} routing id {f.routing_id} != REQ's {requests[f.id]}")
                dir_ = (f.meta or {}).get("credit_dir")
                if dir_ != "request" or not f.credit or f.credit <= 0:
                    add(
                        "FLW-3",
                        f"{tag}: credit {f.credit!r}, credit_dir {dir_!r} "
                        "(want a positive count, 'request')",
                    )
            continue
        # flow frames --------------------------------------------------------------------
        key = f.flow_key
        if f.id in requests and f.routing_id != requests[f.id]:
            add("REQ-5", f"{tag} routing id {f.routing_id} != REQ's {requests[f.id]}")
        if f.id in ended and f.id in requests:
            add("TYP-7", f"{tag} after the request's END/ERR")
            continue
        want = seqs.get(key, 0)
        if f.seq != want:
            add("TYP-5", f"{tag} seq {f.seq}, expected {want}")
        seqs[key] = f.seq + 1
        meta = f.meta or {}
        if ft is FrameType.REQ:
            peer.add(f.id)
        if ft is FrameType.STREAM_START:
            sid = f.stream_id or ""
            if (f.id, sid) in streams:
                add("REQ-7", f"{tag}: stream {sid!r} started twice")
            streams[(f.id, sid)] = _Stream(start=f)
            if f.is_sequence:
                run.seen.add("sequence-output")
        elif ft is FrameType.CHUNK:
            st = streams.get((f.id, f.stream_id or ""))
            payload = f.payload or b""
            if f.checksum != checksum(payload):
                add("REQ-11", f"{tag}: checksum {f.checksum} != FNV-1a {checksum(payload)}")
            if st is None or st.closed:
                add("REQ-8", f"{tag}: CHUNK on stream {f.stream_id!r} that is not open")
                continue
            if f.chunk_index != st.chunks:
                add("REQ-9", f"{tag}: chunk_index {f.chunk_index}, expected {st.chunks}")
            st.chunks += 1
            if st.start.is_sequence:
                if len(payload) > max_chunk:
                    add("FRM-15", f"{tag}: fragment of {len(payload)} B > max_chunk {max_chunk}")
                _sequence_fragment(st, payload, tag, add)
            else:
                if _data_len(payload) > max_chunk:
                    add("FRM-15", f"{tag}: {_data_len(payload)} data bytes > max_chunk {max_chunk}")
                try:
                    used, complete = _one_item(payload)
                except ValueError as exc:
                    add("REQ-14", f"{tag}: scalar payload is not CBOR ({exc})")
                else:
                    if not complete or used != len(payload):
                        add("REQ-14", f"{tag}: scalar payload is not exactly one CBOR item")
        elif ft is FrameType.STREAM_END:
            st = streams.get((f.id, f.stream_id or ""))
            if st is None or st.closed:
                add("REQ-8", f"{tag}: STREAM_END on stream {f.stream_id!r} that is not open")
                continue
            st.closed = True
            if st.start.unbounded:
                if f.chunk_count is not None:
                    add("REQ-10", f"{tag}: unbounded stream ends with a chunk_count")
            elif f.chunk_count != st.chunks:
                add("REQ-10", f"{tag}: chunk_count {f.chunk_count} != {st.chunks} CHUNKs sent")
            if st.start.is_sequence and st.buf:
                add("REQ-18", f"{tag}: STREAM_END inside a sequence item")
        elif ft is FrameType.END:
            if f.id not in peer:  # a requester END (peer call) carries no meta
                _end_meta(f, meta, tag, add)
            open_ = [sid for (rid, sid), st in streams.items() if rid == f.id and not st.closed]
            if open_:
                add("REQ-26", f"{tag}: END with stream(s) {open_} still open")
            ended.add(f.id)
        elif ft is FrameType.ERR:
            _err_meta(meta, tag, add)
            ended.add(f.id)
        elif ft is FrameType.LOG:
            run.seen.add("progress-log" if meta.get("level") == "progress" else "log")
            _log_meta(meta, tag, add)
    with run.lock:
        run.audited_sessions += 1
        run.audited_frames += len(received)


def _sequence_fragment(st: _Stream, payload: bytes, tag: str, add: Any) -> None:
    """Reassemble RFC 8742 fragments; an item must start a new CHUNK (REQ-17)."""
    if not st.buf:
        data = payload
        pos = 0
        while pos < len(data):
            try:
                used, complete = _one_item(data[pos:])
            except ValueError as exc:
                add("REQ-17", f"{tag}: sequence fragment is not CBOR ({exc})")
                return
            if not complete:
                if pos:
                    add("REQ-17", f"{tag}: a new item starts inside a CHUNK that ended another")
                st.buf += data[pos:]
                return
            pos += used
            if pos < len(data):
                add("REQ-17", f"{tag}: CHUNK holds more than one item")
                return
        return
    st.buf += payload
    try:
        used, complete = _one_item(bytes(st.buf))
    except ValueError as exc:
        add("REQ-17", f"{tag}: fragments do not reassemble ({exc})")
        st.buf.clear()
        return
    if complete:
        if used != len(st.buf):
            add(
                "REQ-17", f"{tag}: the next item starts inside the CHUNK that ends the previous one"
            )
        st.buf.clear()


def _end_meta(f: Frame, meta: Mapping[str, Any], tag: str, add: Any) -> None:
    code = meta.get("exit_code")
    if type(code) is not int or code != 0:
        add("REQ-29", f"{tag}: exit_code {code!r} (want integer 0)")
    prog = meta.get("progress")
    if not isinstance(prog, float) or not 0.0 <= prog <= 1.0:
        add("REQ-29", f"{tag}: progress {prog!r} (want a float in 0..1)")
    if "message" in meta and not isinstance(meta["message"], str):
        add("REQ-29", f"{tag}: message {meta['message']!r} is not text")
    if f.eof is not True:
        add("REQ-29", f"{tag}: eof {f.eof!r} (want true)")


def _err_meta(meta: Mapping[str, Any], tag: str, add: Any) -> None:
    code = meta.get("code")
    if not isinstance(code, str) or not code:
        add("REQ-30", f"{tag}: code {code!r} (want non-empty text)")
    msg = meta.get("message")
    if not isinstance(msg, str) or not msg:
        add("REQ-30", f"{tag}: message {msg!r} (want non-empty text)")
    cls = meta.get("attribution_class")
    if cls not in ATTRIBUTION_CLASSES:
        add(
            "ERR-1", f"{tag}: attribution_class {cls!r} is not one of {sorted(ATTRIBUTION_CLASSES)}"
        )
    if "arg_urn" in meta and (not isinstance(meta["arg_urn"], str) or not meta["arg_urn"]):
        add("REQ-31", f"{tag}: arg_urn {meta['arg_urn']!r} (absent or non-empty text)")


def _log_meta(meta: Mapping[str, Any], tag: str, add: Any) -> None:
    level = meta.get("level")
    if not isinstance(level, str) or not level:
        add("REQ-33", f"{tag}: level {level!r} (want non-empty text)")
        return
    if not isinstance(meta.get("message"), str):
        add("REQ-33", f"{tag}: message {meta.get('message')!r} is not text")
    if level == "progress":
        prog = meta.get("progress")
        if not isinstance(prog, float) or not 0.0 <= prog <= 1.0:
            add("REQ-34", f"{tag}: progress {prog!r} (want a float in 0..1)")
        if "attribution_class" in meta:
            add("REQ-34", f"{tag}: a progress LOG carries attribution_class")
        return
    cls = meta.get("attribution_class")
    if cls is None:
        add("REQ-33", f"{tag}: a {level!r} LOG without attribution_class")
    elif cls not in ATTRIBUTION_CLASSES:
        add("ERR-1", f"{tag}: LOG attribution_class {cls!r} is not one of the five words")
    if "arg_urn" in meta and (not isinstance(meta["arg_urn"], str) or not meta["arg_urn"]):
        add("REQ-31", f"{tag}: LOG arg_urn {meta['arg_urn']!r} (absent or non-empty text)")
