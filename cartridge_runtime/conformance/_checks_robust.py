"""Checks of what a cartridge does with bad or unexpected input, and of its exit."""

from __future__ import annotations

import concurrent.futures
import re
import struct
import time

import cbor2

from ..protocol import (
    DEFAULT_LIMITS,
    ZERO_ID,
    ErrorCode,
    Frame,
    FrameType,
    Limits,
    MessageId,
    encode_body,
    encode_frame,
    frames,
)
from ._context import CheckContext
from ._known import KNOWN_DEFECTS
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped
from ._session import TargetGone, WaitTimeout

SILENT_EXIT_0 = "capdag 1.524.58 prints 'Read error' and exits 0 on malformed input, sending no ERR"


def _prefixed(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


MALFORMED: dict[str, bytes] = {
    "bad CBOR body": _prefixed(b"\xff\xfe\xfd"),
    "text at top level": _prefixed(cbor2.dumps("not a map")),
    "map without key 2": _prefixed(cbor2.dumps({0: 6, 1: 7, 3: 0})),
    "frame type 2": _prefixed(cbor2.dumps({0: 6, 1: 2, 2: 0, 3: 0})),
}


def _exit_after(
    ctx: CheckContext, label: str, data: bytes, limits: Limits = DEFAULT_LIMITS
) -> tuple[int | None, bool, str]:
    """Fresh process, setup, write ``data``; (exit status or None, ERR id 0 seen, stderr).

    Computed once per run and label: FRM-20 and FRM-21 judge the same bad-CBOR process."""
    return ctx.run.once(
        f"exit-after:{label}", lambda: _exit_after_fresh(ctx, data, limits), ctx.deadline
    )


def _exit_after_fresh(
    ctx: CheckContext, data: bytes, limits: Limits
) -> tuple[int | None, bool, str]:
    conn = ctx.ready(limits)
    conn.session.write(data)
    saw_err = False
    deadline = min(ctx.deadline, time.monotonic() + 10.0)
    try:
        while True:
            f = conn.session.recv(deadline)
            if f.frame_type is FrameType.ERR and f.id == ZERO_ID:
                saw_err = True
    except (WaitTimeout, TargetGone):
        pass
    rc = conn.session.wait_exit(deadline)
    return rc, saw_err, conn.session.stderr_text


def _judge(label: str, rc: int | None, stderr: str) -> None:
    if rc is None:
        raise CheckFailed(f"{label}: still running (no exit)")
    if rc == 0:
        raise CheckFailed(
            f"{label}: silent exit 0",
            known_defect=SILENT_EXIT_0 if "Read error" in stderr else None,
        )


def _parallel(
    ctx: CheckContext, cases: dict[str, bytes]
) -> dict[str, tuple[int | None, bool, str]]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futs = {label: pool.submit(_exit_after, ctx, label, data) for label, data in cases.items()}
        return {label: f.result() for label, f in futs.items()}


@check(
    "FRM-20",
    "Malformed frame: diagnostic and non-zero exit",
    rules=("FRM-20", "FRM-2", "FRM-4", "TYP-1"),
    ck="CK-32",
    procs=4,
)
def malformed_frame(ctx: CheckContext) -> str:
    for label, (rc, _err, stderr) in _parallel(ctx, MALFORMED).items():
        _judge(label, rc, stderr)
    return "bad CBOR, text top level, missing id, type 2: all non-zero exits"


def _exit_with_open_request(ctx: CheckContext, data: bytes) -> tuple[int | None, bool, str, str]:
    """Fresh process, setup, a REQ for the identity cap left open (no body, no END), then
    ``data``: (exit status, ERR id 0 seen, the open request's ERR code or "", stderr)."""
    conn = ctx.ready(DEFAULT_LIMITS)
    rid = MessageId.new()
    conn.session.write(encode_frame(frames.req(rid, "cap:effect=none")) + data)
    saw_zero = False
    code = ""
    deadline = min(ctx.deadline, time.monotonic() + 10.0)
    try:
        while True:
            f = conn.session.recv(deadline)
            if f.frame_type is FrameType.ERR and f.id == ZERO_ID:
                saw_zero = True
            elif f.frame_type is FrameType.ERR and f.id == rid:
                code = str((f.meta or {}).get("code", ""))
    except (WaitTimeout, TargetGone):
        pass
    rc = conn.session.wait_exit(deadline)
    return rc, saw_zero, code, conn.session.stderr_text


@check(
    "FRM-21",
    "ERR PROTOCOL_ERROR id 0, and for each open request, before exiting on malformed input",
    "SHOULD",
    rules=("FRM-21",),
    ck="CK-32",
)
def malformed_err(ctx: CheckContext) -> str:
    rc, saw_err, code, stderr = _exit_with_open_request(ctx, MALFORMED["bad CBOR body"])
    if not saw_err:
        raise CheckFailed(
            f"no ERR id 0 before exit (status {rc})",
            known_defect=SILENT_EXIT_0 if rc == 0 and "Read error" in stderr else None,
        )
    if code != ErrorCode.PROTOCOL_ERROR:
        got = f"ERR {code}" if code else "no ERR"
        raise CheckFailed(f"the request still open got {got}, not ERR PROTOCOL_ERROR (exit {rc})")
    return f"ERR id 0 and ERR PROTOCOL_ERROR for the open request, then exit {rc}"


@check(
    "FRM-12",
    "Oversize length prefix refused without reading the body",
    rules=("FRM-12", "FRM-20"),
    ck="CK-33",
    procs=1,
)
def oversize_prefix(ctx: CheckContext) -> str:
    limits = Limits(max_frame=65536)
    rc, _err, stderr = _exit_after(
        ctx, "prefix 65537", struct.pack(">I", 65537) + b"\xa0" * 16, limits
    )
    _judge("length prefix 65537 over max_frame 65536", rc, stderr)
    return f"exit {rc} without waiting for the body"


@check("TYP-10", "RELAY_NOTIFY / RELAY_STATE to a cartridge are fatal", ck="CK-35", procs=2)
def relay_frames(ctx: CheckContext) -> str:
    cases = {
        "RELAY_NOTIFY": _prefixed(
            encode_body(
                Frame(frame_type=FrameType.RELAY_NOTIFY, id=ZERO_ID, meta={"manifest": b"{}"})
            )
        ),
        "RELAY_STATE": _prefixed(
            encode_body(Frame(frame_type=FrameType.RELAY_STATE, id=ZERO_ID, payload=b"state"))
        ),
    }
    results = _parallel(ctx, cases)
    for label, (rc, saw_err, stderr) in results.items():
        if saw_err:
            continue
        _judge(label, rc, stderr)
    return ", ".join(f"{k}: {'ERR' if v[1] else f'exit {v[0]}'}" for k, v in results.items())


@check("FRM-23", "stdin EOF ends the process promptly with status 0", ck="CK-36", procs=1)
def stdin_eof(ctx: CheckContext) -> str:
    conn = ctx.ready()  # the setup's identity request has ended: the process is idle
    conn.session.close_stdin()
    rc = conn.session.wait_exit(ctx.deadline)
    if rc is None:
        raise CheckFailed("EOF while idle after a request: still running at the check's timeout")
    if rc != 0:
        raise CheckFailed(f"EOF while idle after a request: exit status {rc}")
    return "exit 0 on EOF while idle after a request"


#: Codes the protocol itself defines; any other code on an ERR is a handler's own (typed).
GENERIC_CODES: frozenset[str] = frozenset(
    {
        ErrorCode.HANDLER_ERROR,
        ErrorCode.NO_HANDLER,
        ErrorCode.PROTOCOL_ERROR,
        ErrorCode.PROTOCOL_VIOLATION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.CANCELLED,
        ErrorCode.ABORTED,
        ErrorCode.ABORTED_COLLATERAL,
        ErrorCode.UNKNOWN_POOL,
        ErrorCode.CREDIT_VIOLATION,
    }
)
_FLATTENED = re.compile(r"^[A-Z][A-Z0-9_]{2,}: ")


@check("ERR-4", "Typed handler errors keep code, class and arg_urn", ck="CK-38", audit=True)
def typed_error(ctx: CheckContext) -> str:
    errors = list(ctx.run.sweep_errors)
    flattened = [
        report
        for report in errors
        if report.code == ErrorCode.HANDLER_ERROR and _FLATTENED.match(report.message)
    ]
    if flattened:
        raise CheckFailed(
            f"a typed error arrived as HANDLER_ERROR/{flattened[0].attribution_class}: "
            f"{flattened[0].message[:80]!r}",
            known_defect=KNOWN_DEFECTS["ERR-4"],
        )
    typed = sorted({str(r.code) for r in errors if r.code not in GENERIC_CODES})
    if not typed:
        raise CheckSkipped("no manifest cap raised a typed error for the kit's sample inputs")
    return f"typed errors kept their codes: {', '.join(typed)}"
