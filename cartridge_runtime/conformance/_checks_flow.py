"""Checks of flow control, heartbeat and cancel, all driven through the identity cap with
its input left open (identity echoes whatever it is given, so it keeps a request running for
as long as the kit wants)."""

from __future__ import annotations

import json
import math
import time

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
from ._checks_handshake import SMALL_FRAME_LIMITS, SMALL_LIMITS
from ._context import CheckContext, Conn, meta_of
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped
from ._session import TargetGone, WaitTimeout

#: Seconds a heartbeat reply may take (FLW-12: it is answered at once, by the reading side).
HEARTBEAT_WAIT = 3.0


def _hb_wait(ctx: CheckContext) -> float:
    """How long to wait for a heartbeat reply: briefly once the target left one unanswered
    in this run (the checks after the first silence only confirm it)."""
    wait = 0.5 if "heartbeat-silent" in ctx.run.seen else HEARTBEAT_WAIT
    return min(wait, ctx.remaining())


def _silent(ctx: CheckContext) -> None:
    with ctx.run.lock:
        ctx.run.seen.add("heartbeat-silent")


def _open_identity(conn: Conn, rid: MessageId, data: bytes = b"still running") -> None:
    """REQ + STREAM_START + one CHUNK of an identity request; the body stays open."""
    conn.exchange(IDENTITY_CAP, [cbor2.dumps(data)], rid=rid, finish=False, until_terminal=False)


def _finish_identity(conn: Conn, rid: MessageId, sent: int = 1) -> object:
    return conn.exchange(IDENTITY_CAP, [], rid=rid, send_req=False, first_index=sent)


@check(
    "FLW-12",
    "HEARTBEAT answered at once, also while a request runs",
    rules=("FLW-12", "HSK-22"),
    ck="CK-26",
)
def heartbeat_during_request(ctx: CheckContext) -> str:
    conn = ctx.shared()
    rid = MessageId.new()
    _open_identity(conn, rid)
    for hid in (MessageId.new(), MessageId(42)):
        reply = conn.heartbeat(hid, seconds=_hb_wait(ctx))
        if reply is None:
            _silent(ctx)
            raise CheckFailed(f"no HEARTBEAT reply (id {hid}) while a request was open")
    ex = _finish_identity(conn, rid)
    if ex.terminal is not None and ex.terminal.frame_type is FrameType.ERR:  # type: ignore[attr-defined]
        raise CheckFailed(f"the open request failed after the heartbeat: {ex.describe()}")  # type: ignore[attr-defined]
    return "UUID and integer heartbeats answered with the same id before the request ended"


@check(
    "FLW-13",
    "Heartbeat reply: seq 0, no routing id, counters and pools",
    rules=("FLW-13",),
    ck="CK-26",
)
def heartbeat_reply_shape(ctx: CheckContext) -> str:
    conn = ctx.shared()
    reply = conn.heartbeat(MessageId.new(), seconds=_hb_wait(ctx))
    if reply is None:
        _silent(ctx)
        raise CheckSkipped("no heartbeat reply to inspect (FLW-12 reports the silence)")
    meta = meta_of(reply)
    problems = []
    if reply.seq != 0:
        problems.append(f"seq {reply.seq}")
    if reply.routing_id is not None:
        problems.append(f"routing id {reply.routing_id}")
    for name in ("drops_total", "stragglers_total", "overruns_total"):
        if type(meta.get(name)) is not int:
            problems.append(f"{name} {meta.get(name)!r}")
    if not isinstance(meta.get("pools"), bytes):
        problems.append("no pools byte string")
    if problems:
        raise CheckFailed("reply has " + ", ".join(problems))
    return "seq 0, no routing id, three counters, pools"


@check("FLW-2", "CHUNKs never beyond the credit window", rules=("FLW-1", "FLW-2"), ck="CK-27")
def credit_respected(ctx: CheckContext) -> str:
    conn = ctx.shared(SMALL_LIMITS)
    window = conn.limits.initial_credit
    data = bytes(range(256)) * 24  # 6144 bytes, at least 7 response chunks
    payloads = [cbor2.dumps(data[i : i + 600]) for i in range(0, len(data), 600)]
    ex = conn.exchange(IDENTITY_CAP, payloads, respond="slow", quiet=0.1)
    if ex.credit_overruns:
        raise CheckFailed(ex.credit_overruns[0])
    if not ex.ok or ex.output != data:
        raise CheckFailed(f"echo under a window of {window} with slow grants: {ex.describe()}")
    return f"window {window}, {ex.response_grants} slow single grants: never exceeded"


def _many(ctx: CheckContext, window: int, n: int) -> tuple[object, int]:
    limits = SMALL_FRAME_LIMITS
    if window != limits.initial_credit:
        limits = Limits(max_chunk=1000, initial_credit=window)
    conn = ctx.shared(limits)
    data = bytes(range(256)) * 16
    payloads = [cbor2.dumps(data[i % 16 * 200 : i % 16 * 200 + 200]) for i in range(n)]
    ex = conn.exchange(IDENTITY_CAP, payloads)
    return ex, n


@check(
    "FLW-4",
    "Input credit returned in time, never more than received",
    rules=("FLW-4", "FLW-5"),
    ck="CK-28",
)
def credit_returned(ctx: CheckContext) -> str:
    ex, n = _many(ctx, 8, 24)
    grants = ex.input_grants  # type: ignore[attr-defined]
    if not ex.ok:  # type: ignore[attr-defined]
        raise CheckFailed(f"24 chunks under a window of 8: {ex.describe()}")  # type: ignore[attr-defined]
    if sum(grants) > n:
        raise CheckFailed(f"granted {sum(grants)} credits for {n} chunks")
    return f"24 chunks, window 8: {len(grants)} grants totalling {sum(grants)}"


@check("FLW-6", "Credit grants batched at max(1, window/2)", "SHOULD", rules=("FLW-6",), ck="CK-28")
def credit_batched(ctx: CheckContext) -> str:
    window, n = 8, 32
    ex, _ = _many(ctx, window, n)
    grants: list[int] = ex.input_grants  # type: ignore[attr-defined]
    batch = max(1, window // 2)
    if not ex.ok:  # type: ignore[attr-defined]
        raise CheckSkipped(f"the request failed ({ex.describe()}); see FLW-4")  # type: ignore[attr-defined]
    limit = 2 * math.ceil(n / batch)
    if len(grants) > limit or any(g > batch * 2 for g in grants):
        raise CheckFailed(
            f"{len(grants)} grants {grants[:12]} for {n} chunks (batches of {batch} expected)"
        )
    return f"{n} chunks, window {window}: grants {grants}"


@check("FLW-7", "Credit violation ends the request with ERR", rules=("FLW-7", "ERR-6"), ck="CK-29")
def credit_violation(ctx: CheckContext) -> str:
    conn = ctx.shared(SMALL_LIMITS)
    window = conn.limits.initial_credit
    n = 16
    payloads = [cbor2.dumps(bytes([i]) * 64) for i in range(n)]
    ex = conn.exchange(IDENTITY_CAP, payloads, obey_credit=False)
    t = ex.terminal
    assert t is not None
    if t.frame_type is FrameType.ERR:
        meta = meta_of(t)
        msg = str(meta.get("message", ""))
        if ErrorCode.CREDIT_VIOLATION not in msg and meta.get("code") != ErrorCode.CREDIT_VIOLATION:
            raise CheckFailed(
                f"ERR {meta.get('code')!r} {msg[:60]!r} does not name CREDIT_VIOLATION"
            )
        conn.identity()
        return f"ERR {meta.get('code')} ({msg[:50]}...); still serving"
    granted = window + sum(ex.input_grants)
    if granted < n:
        raise CheckFailed(
            f"{n} chunks accepted with only {granted} credits granted (want ERR CREDIT_VIOLATION)"
        )
    return "the cartridge granted enough credit in time; echo correct"


def _report(code: ErrorCode, attribution: AttributionClass, message: str) -> ErrorReport:
    return ErrorReport(code=code, attribution_class=attribution, message=message)


#: A CANCEL's reason (None: no meta) and the ERR it must end the request with (FLW-18's
#: table; the expected message need only be part of the ERR's).
CANCEL_CASES: tuple[tuple[ErrorReport | None, ErrorReport], ...] = (
    (None, _report(ErrorCode.CANCELLED, AttributionClass.INTERNAL, "Request cancelled")),
    (
        _report(ErrorCode.CANCELLED, AttributionClass.USER, "Cancelled by user"),
        _report(ErrorCode.CANCELLED, AttributionClass.USER, "Cancelled by user"),
    ),
    (
        _report(ErrorCode.ABORTED, AttributionClass.RESOURCE, "disk gone"),
        _report(ErrorCode.ABORTED, AttributionClass.RESOURCE, "disk gone"),
    ),
)


def _cancel_and_wait(
    conn: Conn,
    ctx: CheckContext,
    rid: MessageId,
    reason: ErrorReport | None = None,
    *,
    force_kill: bool = False,
) -> Frame:
    if reason is None:
        conn.send(build.cancel(rid, force_kill=force_kill))
    else:
        conn.send(
            build.cancel(
                rid,
                force_kill=force_kill,
                code=reason.code,
                attribution_class=reason.attribution_class,
                message=reason.message,
            )
        )
    try:
        return conn.session.expect(lambda f: f.id == rid and f.frame_type.is_terminal, ctx.deadline)
    except (WaitTimeout, TargetGone) as exc:
        raise CheckFailed(f"no terminal after CANCEL ({exc})") from None


@check("FLW-18", "CANCEL honoured with the reason's ERR", rules=("FLW-16", "FLW-18"), ck="CK-30")
def cancel_honoured(ctx: CheckContext) -> str:
    conn = ctx.shared()
    for reason, want in CANCEL_CASES:
        rid = MessageId.new()
        _open_identity(conn, rid)
        t = _cancel_and_wait(conn, ctx, rid, reason)
        got = ErrorReport.from_meta(t.meta)
        label = "no reason" if reason is None else reason.code
        if t.frame_type is not FrameType.ERR:
            raise CheckFailed(f"cancel ({label}): the request ended with END")
        if got.code != want.code or got.attribution_class != want.attribution_class:
            raise CheckFailed(
                f"cancel ({label}): ERR {str(got.code)!r}/{str(got.attribution_class)!r} "
                f"(want {want.code}/{want.attribution_class})"
            )
        if want.message not in got.message:
            raise CheckFailed(f"cancel ({label}): message {got.message!r} lacks {want.message!r}")
    return (
        "no reason, CANCELLED/user and ABORTED/resource: one ERR each with code, class and message"
    )


@check("FLW-19", "Repeated or unknown CANCEL produces nothing", rules=("FLW-19",), ck="CK-30")
def cancel_quiet(ctx: CheckContext) -> str:
    conn = ctx.shared()
    rid = MessageId.new()
    _open_identity(conn, rid)
    _cancel_and_wait(conn, ctx, rid)
    unknown = MessageId.new()
    conn.send(build.cancel(rid), build.cancel(unknown))
    # the identity request that follows is the barrier: the target reads the cancels
    # first, so whatever they provoke arrives among the frames read meanwhile (an event,
    # not a quiet period)
    ex = conn.identity()
    extra = [
        f for f in ex.others if f.id in (rid, unknown) and f.frame_type is not FrameType.CREDIT
    ]
    if extra:
        raise CheckFailed(
            f"repeated/unknown CANCEL answered with {[f.frame_type.name for f in extra]}"
        )
    return "a second cancel and a cancel of an unknown rid: no frame; still serving"


@check(
    "FLW-20",
    "force_kill CANCEL: the ERR comes first",
    rules=("FLW-20", "FLW-18"),
    ck="CK-30",
    procs=1,
)
def cancel_force_kill(ctx: CheckContext) -> str:
    conn = ctx.ready()
    rid = MessageId.new()
    _open_identity(conn, rid)
    t = _cancel_and_wait(conn, ctx, rid, force_kill=True)
    if t.frame_type is not FrameType.ERR or meta_of(t).get("code") != ErrorCode.CANCELLED:
        raise CheckFailed(
            f"force_kill cancel ended with {t.frame_type.name} {meta_of(t).get('code')!r} "
            "(want ERR CANCELLED)"
        )
    rc = conn.session.wait_exit(min(ctx.deadline, time.monotonic() + 0.3))
    if rc == 0:
        raise CheckFailed(
            "the process exited with status 0 after a force_kill cancel (non-zero or alive)"
        )
    return "ERR CANCELLED, then " + ("still alive" if rc is None else f"exit {rc}")


@check(
    "FLW-11",
    "Unbounded input stream (key 20, no chunk_count) echoed",
    rules=("FLW-11",),
    ck="CK-39",
)
def unbounded_input(ctx: CheckContext) -> str:
    conn = ctx.shared(SMALL_FRAME_LIMITS)
    data = bytes(range(256)) * 10  # 2560 bytes in 5 chunks
    payloads = [cbor2.dumps(data[i : i + 512]) for i in range(0, len(data), 512)]
    ex = conn.exchange(IDENTITY_CAP, payloads, unbounded=True)
    if not ex.ok:
        raise CheckFailed(f"identity with an unbounded input stream: {ex.describe()}")
    if ex.output != data:
        raise CheckFailed(
            f"unbounded input echoed as {len(ex.output)} bytes differing from the {len(data)} sent"
        )
    return f"{len(payloads)} chunks on an unbounded stream (STREAM_END without key 15): echoed"


@check(
    "FLW-22",
    "CLOSE_STREAM without live feeds is ignored; the request finishes",
    rules=("FLW-22",),
    ck="CK-40",
)
def close_stream_ignored(ctx: CheckContext) -> str:
    conn = ctx.shared(SMALL_FRAME_LIMITS)
    rid = MessageId.new()
    _open_identity(conn, rid, b"before ")
    # one naming the (bounded, not live-feed) input stream, one for the whole request
    conn.send(build.close_stream(rid, stream_id="arg-0"), build.close_stream(rid))
    ex = conn.exchange(
        IDENTITY_CAP, [cbor2.dumps(b"after")], rid=rid, send_req=False, first_index=1
    )
    if not ex.ok:
        raise CheckFailed(f"after CLOSE_STREAM the request ended with {ex.describe()}")
    if ex.output != b"before after":
        raise CheckFailed(
            f"after CLOSE_STREAM the echo is {bytes(ex.output[:40])!r} "
            "(want b'before after': input after CLOSE_STREAM still belongs to the request)"
        )
    return "two CLOSE_STREAMs ignored: more input accepted, the request ended with END"


#: A pool name no cartridge declares.
NO_SUCH_POOL = "conformance-no-such-pool-7f3a"


def _probe(conn: Conn, ctx: CheckContext, desired: dict[str, int] | None) -> Frame:
    """A HEARTBEAT (with ``desired_capacities`` when given) and its answer: the reply or
    an ERR with the same id. Other frames are kept for later reads."""
    hid = MessageId.new()
    meta = {"desired_capacities": json.dumps(desired).encode()} if desired is not None else None
    conn.send(build.heartbeat(hid, meta=meta))
    held: list[Frame] = []
    deadline = time.monotonic() + _hb_wait(ctx)
    try:
        return conn.session.expect(
            lambda f: f.id == hid and f.frame_type in (FrameType.HEARTBEAT, FrameType.ERR),
            deadline,
            on_other=held.append,
        )
    except (WaitTimeout, TargetGone) as exc:
        _silent(ctx)
        raise CheckFailed(f"no answer to a heartbeat probe ({exc})") from None
    finally:
        conn._pending.extend(held)


def _configured(reply: Frame, pool: str) -> object:
    try:
        pools = json.loads(meta_of(reply).get("pools") or b"")
        return pools[pool]["configured"]
    except (ValueError, TypeError, KeyError):
        return None


@check(
    "FLW-14",
    "desired_capacities applied; an unknown pool refused with UNKNOWN_POOL",
    rules=("FLW-14",),
    ck="CK-41",
)
def desired_capacities(ctx: CheckContext) -> str:
    conn = ctx.shared()
    try:
        first = _probe(conn, ctx, None)
    except CheckFailed:
        first = None
    if first is None or first.frame_type is not FrameType.HEARTBEAT:
        raise CheckSkipped("a plain heartbeat got no reply (FLW-12 reports it)")
    try:
        pools = json.loads(meta_of(first).get("pools") or b"")
        names = [n for n in pools if n != "all" and isinstance(pools[n], dict)]
    except (ValueError, TypeError, AttributeError):
        raise CheckSkipped(
            "the heartbeat reply has no readable pools (FLW-13 reports it)"
        ) from None
    if not names:
        raise CheckSkipped("no pool besides 'all' to configure")
    pool = "cap:effect=none" if "cap:effect=none" in names else names[0]
    before = pools[pool].get("configured")
    base = before if type(before) is int and before > 0 else 0
    wanted = base + 7  # a larger limit than before (or a limit where there was none)
    reply = _probe(conn, ctx, {pool: wanted})
    if reply.frame_type is not FrameType.HEARTBEAT:
        raise CheckFailed(f"desired_capacities {{{pool!r}: {wanted}}} refused: {meta_of(reply)}")
    if _configured(reply, pool) != wanted:
        raise CheckFailed(
            f"after desired_capacities {{{pool!r}: {wanted}}} the reply shows configured "
            f"{_configured(reply, pool)!r}"
        )
    refused = _probe(conn, ctx, {pool: wanted + 1, NO_SUCH_POOL: 1})
    meta = meta_of(refused)
    if refused.frame_type is not FrameType.ERR or meta.get("code") != ErrorCode.UNKNOWN_POOL:
        raise CheckFailed(
            f"an unknown pool in desired_capacities got {refused.frame_type.name} "
            f"{meta.get('code')!r} (want ERR UNKNOWN_POOL with the heartbeat's id)"
        )
    if meta.get("attribution_class") != AttributionClass.INTERNAL:
        raise CheckFailed(f"UNKNOWN_POOL class {meta.get('attribution_class')!r} (want internal)")
    after = _probe(conn, ctx, None)
    if after.frame_type is not FrameType.HEARTBEAT or _configured(after, pool) != wanted:
        raise CheckFailed(
            f"a refused batch was partly applied: {pool!r} configured "
            f"{_configured(after, pool)!r} (want {wanted}, unchanged)"
        )
    restore = _probe(conn, ctx, {pool: before if type(before) is int else 0})
    if restore.frame_type is not FrameType.HEARTBEAT:
        raise CheckFailed(f"restoring {pool!r} configured to {before!r} was refused")
    return f"{pool} configured {before} -> {wanted} in the reply; unknown pool: ERR UNKNOWN_POOL"
