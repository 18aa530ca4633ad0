"""Checks of requests and responses: dispatch errors, the baseline traffic the frame audit
judges, size limits, sequences and bad checksums, plus the audit-backed checks."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import cbor2

from ..protocol import (
    IDENTITY_CAP,
    AttributionClass,
    ErrorCode,
    ErrorReport,
    Frame,
    FrameType,
    Limits,
    MessageId,
)
from ..protocol import (
    frames as build,
)
from ._checks_handshake import PROBE_CAP, SMALL_FRAME_LIMITS, SMALL_LIMITS
from ._context import CheckContext, meta_of
from ._known import KNOWN_DEFECTS
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped

#: Limits of the baseline sessions: small chunks and windows so that a few KiB exercise
#: multi-chunk streams and credit.
BASELINE_LIMITS = SMALL_LIMITS


def _blob(n: int) -> bytes:
    return bytes(range(256)) * (n // 256) + bytes(range(n % 256))


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [cbor2.dumps(data[i : i + size]) for i in range(0, len(data), size)]


def run_baseline(ctx: CheckContext) -> str:
    """Ordinary traffic for the frame audit: multi-chunk echoes with UUID, integer and no
    routing ids, a sequence input, NO_HANDLER, a heartbeat, and a small max_frame."""
    conn = ctx.shared(BASELINE_LIMITS)
    data = _blob(5000)
    notes = []
    for xid in (None, MessageId.new(), MessageId(7)):
        ex = conn.exchange(IDENTITY_CAP, _chunks(data, 700), xid=xid)
        if not ex.ok or ex.output != data:
            notes.append(f"echo with xid {xid}: {ex.describe()}")
    conn.exchange(PROBE_CAP, [cbor2.dumps(b"x")], xid=MessageId(8))
    conn.heartbeat(seconds=2.0)
    # a sequence stream whose middle item spans several fragments
    items = [b"a", _blob(2500), "text item", [1, 2, 3]]
    frags: list[bytes] = []
    for item in items:
        enc = cbor2.dumps(item)
        frags += [enc[i : i + 900] for i in range(0, len(enc), 900)]
    ex = conn.exchange(IDENTITY_CAP, frags, is_sequence=True, xid=MessageId(9))
    if any(f.is_sequence for f in ex.starts.values()):
        ctx.run.seen.add("sequence-output")
    return "; ".join(notes) or "baseline traffic complete"


def run_baseline_frame(ctx: CheckContext) -> str:
    """Baseline traffic under a small ``max_frame`` (4096): an echo of a few KiB, on the
    shared session the window-8 credit checks also use."""
    conn = ctx.shared(SMALL_FRAME_LIMITS)
    data = _blob(5000)
    ex = conn.exchange(IDENTITY_CAP, _chunks(data, 900))
    if not ex.ok or ex.output != data:
        return f"echo under max_frame 4096: {ex.describe()}"
    return "baseline traffic under max_frame 4096 complete"


def sample(media: str) -> bytes:
    if "json" in media:
        return b'{"n": 2, "text": "alpha beta gamma"}'
    if "utf-8" in media or "textable" in media:
        return b"alpha beta gamma"
    return b"conformance probe bytes"


def sweep_caps(manifest_raw: object) -> list[tuple[str, str]]:
    """(cap URN, stdin media) of every manifest cap other than identity that can be called
    with a single stdin argument and no other required one."""
    try:
        manifest = json.loads(manifest_raw) if isinstance(manifest_raw, bytes) else {}
    except ValueError:
        return []
    out = []
    for group in manifest.get("cap_groups", []) if isinstance(manifest, dict) else []:
        for cap in group.get("caps", []) if isinstance(group, dict) else []:
            if (
                not isinstance(cap, dict)
                or cap.get("urn") == IDENTITY_CAP
                or not isinstance(cap.get("urn"), str)
            ):
                continue
            args = [a for a in cap.get("args", []) if isinstance(a, dict)]
            stdin = [
                (a, src["stdin"])
                for a in args
                for src in a.get("sources", [])
                if isinstance(src, dict) and isinstance(src.get("stdin"), str)
            ]
            others = [a for a in args if a.get("required") and all(a is not x for x, _ in stdin)]
            if len(stdin) == 1 and not others and not stdin[0][0].get("is_sequence"):
                out.append((cap["urn"], stdin[0][1]))
    return out


def run_sweep(ctx: CheckContext) -> str:
    """Call each simple manifest cap once with a small sample input so that the audit sees
    the target's own outputs (sequence streams, LOG frames, errors), not only identity's."""
    hello = ctx.run.hello
    if hello is None:  # borrow the shared session's HELLO instead of starting a process
        try:
            ctx.shared()
        finally:
            ctx.release_shared(broken=False)
        hello = ctx.run.hello
    caps = sweep_caps(meta_of(hello).get("manifest") if hello else None)[:16]
    if not caps:
        return "no manifest cap to sweep"
    conn = ctx.shared(BASELINE_LIMITS)
    called = 0
    for i, (urn, media) in enumerate(caps):
        if ctx.remaining() < 2.0:
            break
        rid = MessageId.new()
        try:
            ex = conn.exchange(
                urn,
                [cbor2.dumps(sample(media))],
                rid=rid,
                media=media,
                xid=MessageId(200 + i),
                deadline=min(ctx.deadline - 1.0, time.monotonic() + 3.0),
                cancel_on_peer_call=True,
            )
            called += 1
            if ex.terminal is not None and ex.terminal.frame_type is FrameType.ERR:
                report = ErrorReport.from_meta(ex.terminal.meta)
                with ctx.run.lock:
                    ctx.run.sweep_errors.append(report)
                    ctx.run.sweep_failures.append((urn, media, report))
        except CheckFailed:
            conn.send(build.cancel(rid, xid=MessageId(200 + i)))
            conn.session.drain(0.3)
        if not conn.session.alive():  # retire the shared session, go on with a new one
            ctx.release_shared(broken=True)
            conn = ctx.shared(BASELINE_LIMITS)
    return f"swept {called}/{len(caps)} manifest caps"


@check("REQ-4", "NO_HANDLER for an unknown cap", ck="CK-12")
def no_handler(ctx: CheckContext) -> str:
    conn = ctx.shared()
    ex = conn.exchange(PROBE_CAP, [cbor2.dumps(b"payload")], xid=MessageId(3))
    t = ex.terminal
    meta = meta_of(t) if t is not None else {}
    if t is None or t.frame_type is not FrameType.ERR or meta.get("code") != ErrorCode.NO_HANDLER:
        raise CheckFailed(f"unknown cap got {ex.describe()} (want ERR NO_HANDLER)")
    if meta.get("attribution_class") != AttributionClass.ENVIRONMENT:
        raise CheckFailed(f"NO_HANDLER class {meta.get('attribution_class')!r} (want environment)")
    conn.identity()
    return "ERR NO_HANDLER / environment; body frames ignored; still serving"


@check("REQ-2", "REQ without cap / with a payload refused", rules=("REQ-2", "REQ-3"), ck="CK-13")
def invalid_req(ctx: CheckContext) -> str:
    conn = ctx.shared()
    cases: list[tuple[str, Frame, ErrorCode]] = []
    rid = MessageId.new()
    cases.append(
        (
            "REQ without key 10",
            Frame(frame_type=FrameType.REQ, id=rid, payload=b""),
            ErrorCode.INVALID_REQUEST,
        )
    )
    rid2 = MessageId.new()
    cases.append(
        (
            "REQ with a payload",
            build.req(rid2, IDENTITY_CAP).replace(payload=b"\x01"),
            ErrorCode.PROTOCOL_ERROR,
        )
    )
    for label, frame, code in cases:
        conn.send(frame)
        try:
            t = conn.session.expect(_terminal_of(frame.id), ctx.deadline)
        except Exception as exc:
            raise CheckFailed(f"{label}: no ERR ({exc})") from None
        got = meta_of(t).get("code")
        if t.frame_type is not FrameType.ERR or got != code:
            raise CheckFailed(f"{label}: got {t.frame_type.name} {got!r} (want ERR {code})")
    conn.identity()
    return "ERR INVALID_REQUEST and ERR PROTOCOL_ERROR; still serving"


@check("FRM-16", "Chunks fit max_frame when max_frame < max_chunk", "SHOULD", ck="CK-19", procs=1)
def chunk_fits_frame(ctx: CheckContext) -> str:
    ctx.audit_skip.add("TYP-5")  # a seq gap after a refused write is this check's finding
    conn = ctx.ready(Limits(max_frame=2048, initial_credit=8))
    data = _blob(6000)
    ex = conn.exchange(IDENTITY_CAP, _chunks(data, 500))
    if not ex.ok:
        defect = None
        if (
            "too large"
            in str(
                meta_of(ex.terminal or Frame(frame_type=FrameType.END, id=ex.rid)).get(
                    "message", ""
                )
            ).lower()
        ):
            defect = KNOWN_DEFECTS["FRM-16"]
        raise CheckFailed(f"echo under max_frame 2048: {ex.describe()}", known_defect=defect)
    if ex.output != data:
        raise CheckFailed("echo under max_frame 2048 differs from the input")
    return "6000-byte echo under max_frame 2048 succeeded"


@check(
    "REQ-12",
    "Bad checksum ends the request with ERR; process keeps serving",
    rules=("REQ-12", "ERR-6"),
    ck="CK-31",
)
def bad_checksum(ctx: CheckContext) -> str:
    conn = ctx.shared()
    rid = MessageId.new()
    good = build.chunk(rid, "arg-0", 0, cbor2.dumps(b"corrupted in transit"))
    conn.send(
        build.req(rid, IDENTITY_CAP),
        build.stream_start(rid, "arg-0", "media:"),
        good.replace(checksum=(good.checksum or 0) ^ 0x5A5A),
        build.stream_end(rid, "arg-0", 1),
        build.end(rid, response=False),
    )
    try:
        t = conn.session.expect(
            lambda f: f.id == rid and f.frame_type.is_terminal,
            ctx.deadline,
            on_other=_grant(conn, rid),
        )
    except Exception as exc:
        raise CheckFailed(f"no terminal for a request with a bad checksum ({exc})") from None
    if t.frame_type is not FrameType.ERR:
        raise CheckFailed("a CHUNK with a wrong checksum was accepted (END)")
    conn.identity()
    meta = meta_of(t)
    return f"ERR {meta.get('code')!r} ({str(meta.get('message', ''))[:40]}...); still serving"


def _terminal_of(rid: MessageId) -> Callable[[Frame], bool]:
    return lambda f: f.id == rid and f.frame_type.is_terminal


def _grant(conn: object, rid: MessageId) -> Callable[[Frame], None]:
    def grant(f: Frame) -> None:
        if f.id == rid and f.frame_type is FrameType.CHUNK and f.stream_id:
            conn.send(build.credit(rid, 1, "response", stream_id=f.stream_id))  # type: ignore[attr-defined]

    return grant


# -- checks judged by the frame audit --------------------------------------------------------


def _audit_check(
    rule: str, *, need: str | None = None, none_ok: str = ""
) -> Callable[[CheckContext], str]:
    def run(ctx: CheckContext) -> str:
        findings = ctx.run.findings.get(rule, [])
        if findings:
            more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
            raise CheckFailed(findings[0] + more, known_defect=ctx.run.known_defect(rule, findings))
        if not ctx.run.audited_frames:
            raise CheckSkipped("nothing to audit: the target wrote no frame in any session")
        if need and need not in ctx.run.seen:
            raise CheckSkipped(none_ok)
        return f"no violation in {ctx.run.audited_sessions} audited sessions"

    return run


_AUDITED = (
    ("TYP-5", "seq per flow from 0, gap-free", "MUST", ("TYP-5",), "CK-14"),
    ("TYP-6", "Non-flow frames carry seq 0", "MUST", ("TYP-6",), "CK-14"),
    ("REQ-5", "Routing id copied onto every response frame", "MUST", ("REQ-5",), "CK-15"),
    ("REQ-11", "Correct checksum on every CHUNK", "MUST", ("REQ-11",), "CK-16"),
    ("REQ-9", "chunk_index contiguous from 0", "MUST", ("REQ-9",), "CK-17"),
    ("REQ-10", "chunk_count equals the CHUNKs sent", "MUST", ("REQ-10", "FLW-11"), "CK-18"),
    ("REQ-8", "CHUNK and STREAM_END only on open streams", "MUST", ("REQ-8", "REQ-7"), "CK-17"),
    ("FRM-15", "At most max_chunk data bytes per CHUNK", "MUST", ("FRM-15",), "CK-19"),
    ("FRM-14", "No frame larger than max_frame", "MUST", ("FRM-14",), "CK-19"),
    (
        "REQ-14",
        "Every scalar chunk payload is one CBOR item",
        "MUST",
        ("REQ-14", "REQ-19"),
        "CK-20",
    ),
    ("REQ-17", "Sequence fragments reassemble into items", "MUST", ("REQ-17", "REQ-18"), "CK-21"),
    ("REQ-29", "END meta: exit_code 0, float progress, eof", "MUST", ("REQ-29",), "CK-22"),
    ("REQ-26", "No END while a stream is open", "MUST", ("REQ-26",), "CK-22"),
    ("REQ-30", "ERR meta: non-empty code and message", "MUST", ("REQ-30",), "CK-23"),
    ("ERR-1", "attribution_class is one of the five words", "MUST", ("ERR-1",), "CK-23"),
    ("REQ-31", "arg_urn absent or non-empty", "MUST", ("REQ-31",), "CK-23"),
    ("REQ-33", "Non-progress LOG meta", "MUST", ("REQ-33",), "CK-24"),
    ("REQ-34", "Progress LOG meta", "MUST", ("REQ-34",), "CK-24"),
    ("TYP-7", "Nothing of a flow after its END or ERR", "MUST", ("TYP-7", "REQ-27"), "CK-25"),
    ("FLW-3", "CREDIT frame layout and credit_dir", "MUST", ("FLW-3",), "CK-28"),
    ("TYP-4", "Each frame type carries its required keys", "MUST", ("TYP-4", "FRM-7"), ""),
    ("TYP-11", "Cartridge never sends RELAY_*, POLICY or a second HELLO", "MUST", ("TYP-11",), ""),
    ("FRM-2", "Every frame written decodes", "MUST", ("FRM-2", "FRM-4", "TYP-1"), ""),
    ("FRM-17", "Map keys ascending, absent fields left out", "SHOULD", ("FRM-17",), "CK-42"),
    ("FRM-18", "Shortest ints, 8-byte floats, definite lengths", "SHOULD", ("FRM-18",), "CK-42"),
    ("FRM-19", "Meta keys in the fixed order of each frame type", "SHOULD", ("FRM-19",), "CK-42"),
    ("FRM-25", "Nothing but frames on stdout, from the first byte", "SHOULD", ("FRM-25",), "CK-43"),
)

_NEEDS = {
    "REQ-17": (
        "sequence-output",
        "no sequence output stream seen (the identity echo answered in scalar mode)",
    ),
    "REQ-33": ("log", "the target wrote no LOG in any scenario"),
    "REQ-34": ("progress-log", "the target wrote no progress LOG in any scenario"),
}

for _id, _title, _level, _rules, _ck in _AUDITED:
    _need, _why = _NEEDS.get(_id, (None, ""))
    check(_id, _title, _level, rules=_rules, ck=_ck, audit=True)(
        _audit_check(_id, need=_need, none_ok=_why)
    )


def nonce() -> bytes:
    """A fresh random payload."""
    return os.urandom(32)
