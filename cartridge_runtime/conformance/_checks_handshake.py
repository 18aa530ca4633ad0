"""Checks of the handshake: HELLO, limits, manifest, pools, identity, POLICY, CLI manifest."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
from typing import Any

import attrs

from ..protocol import (
    ZERO_ID,
    ErrorCode,
    Frame,
    FrameType,
    Limits,
    MessageId,
)
from ..protocol import (
    frames as build,
)
from ._context import CheckContext, meta_of
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped
from ._session import TargetGone, WaitTimeout, run_capture

LIMIT_NAMES = ("max_frame", "max_chunk", "max_reorder_buffer", "initial_credit")

#: Limits offered by HSK-5: each well below the protocol defaults.
SMALL_LIMITS = Limits(max_frame=200_000, max_chunk=1000, max_reorder_buffer=16, initial_credit=4)
#: Limits of the second small-limits shared session: a 4 KiB max_frame and a window of 8
#: (the baseline's small-frame echo, the credit batching checks, streams and CLOSE_STREAM).
SMALL_FRAME_LIMITS = Limits(max_frame=4096, max_chunk=1000, initial_credit=8)


def target_hello(ctx: CheckContext) -> Frame:
    """The cartridge's HELLO to a default host HELLO (one process per run, cached)."""
    if ctx.run.hello is None:
        try:
            ctx.shared()
        except CheckFailed:
            if ctx.run.hello is None:
                raise
        finally:
            ctx.release_shared(broken=False)  # only its HELLO was wanted
    assert ctx.run.hello is not None
    return ctx.run.hello


@check("HSK-2", "HELLO is the cartridge's first frame", ck="CK-01")
def hello_first(ctx: CheckContext) -> str:
    target_hello(ctx)  # the handshake fails when the first frame is anything else
    return "the first frame read was HELLO"


@check("HSK-3", "Cartridge HELLO is well-formed", rules=("HSK-3", "FRM-4", "FRM-5"), ck="CK-02")
def hello_well_formed(ctx: CheckContext) -> str:
    f = target_hello(ctx)
    problems = []
    if f.id != ZERO_ID:
        problems.append(f"id {f.id} (want 0)")
    if f.seq != 0:
        problems.append(f"seq {f.seq} (want 0)")
    meta = meta_of(f)
    for name in LIMIT_NAMES:
        v = meta.get(name)
        if type(v) is not int or v <= 0:
            problems.append(f"{name} {v!r} (want a positive integer)")
    for name in ("manifest", "pools"):
        if not isinstance(meta.get(name), bytes):
            problems.append(f"{name} is {type(meta.get(name)).__name__} (want a byte string)")
    if "version" not in meta:
        problems.append("no version")
    if problems:
        raise CheckFailed("; ".join(problems))
    return "id 0, seq 0, four positive limits, manifest and pools byte strings"


@check("HSK-4", "HELLO meta version is 6", ck="CK-04")
def hello_version(ctx: CheckContext) -> str:
    v = meta_of(target_hello(ctx)).get("version")
    if type(v) is not int or v != 6:
        raise CheckFailed(f"version {v!r} (want 6)")
    return "version 6"


@check("HSK-5", "Limits negotiated to the minimum", ck="CK-03")
def limits_negotiated(ctx: CheckContext) -> str:
    own = meta_of(target_hello(ctx))  # its answer to the defaults = its own maxima
    conn = ctx.shared(SMALL_LIMITS)  # the session the baseline traffic also uses
    assert conn.hello is not None
    reply = meta_of(conn.hello)
    wrong = []
    for name in LIMIT_NAMES:
        offered = getattr(SMALL_LIMITS, name)
        base = own.get(name)
        want = min(offered, base) if type(base) is int and base > 0 else offered
        if reply.get(name) != want:
            wrong.append(f"{name} {reply.get(name)!r} (want min({offered}, {base}) = {want})")
    if wrong:
        raise CheckFailed("; ".join(wrong))
    return (
        "offered max_chunk 1000, max_frame 200000, reorder 16, credit 4: all echoed as the minimum"
    )


@check(
    "HSK-8",
    "Manifest present and valid",
    rules=("HSK-8", "MAN-3", "MAN-4", "MAN-5", "MAN-6", "MAN-7", "MAN-8", "MAN-9"),
    ck="CK-05",
)
def manifest_valid(ctx: CheckContext) -> str:
    try:
        from ..manifest import Manifest, ManifestError, validate_manifest
    except ImportError as exc:  # pragma: no cover - the package is part of the project
        raise CheckSkipped(f"cartridge_runtime.manifest unavailable: {exc}") from None
    raw = meta_of(target_hello(ctx)).get("manifest")
    if not isinstance(raw, bytes):
        raise CheckFailed(f"manifest is {type(raw).__name__}, not a byte string")
    try:
        manifest = Manifest.from_json(raw)
        validate_manifest(manifest)
    except ManifestError as exc:
        raise CheckFailed(f"{type(exc).__name__}: {exc}") from None
    caps = manifest.all_caps()
    return (
        f"{manifest.name} {manifest.version}: {len(caps)} cap(s), all rules pass, identity present"
    )


@check("MAN-1", "Manifest bytes in the reference's JSON form", "SHOULD", ck="CK-05")
def manifest_byte_form(ctx: CheckContext) -> str:
    from ..manifest import Manifest, ManifestError

    raw = meta_of(target_hello(ctx)).get("manifest")
    if not isinstance(raw, bytes):
        raise CheckSkipped("the manifest is not a byte string (HSK-8 reports it)")
    try:
        sent = json.loads(raw)
        model = json.loads(Manifest.from_json(raw).to_json_bytes())
    except (ValueError, ManifestError):
        raise CheckSkipped("the manifest does not parse (HSK-8 reports it)") from None
    # The JSON text: separators and escapes, judged on the manifest as sent (its own values).
    written = json.dumps(sent).encode()
    if written != raw:
        at = next((i for i, (a, b) in enumerate(zip(raw, written, strict=False)) if a != b), 0)
        start = max(0, at - 20)
        raise CheckFailed(
            f"manifest bytes differ from the reference form at byte {at}: sent "
            f"{raw[start : at + 20]!r}, the form is {written[start : at + 20]!r} "
            "(', ' and ': ' separators, non-ASCII as \\uXXXX)"
        )
    problem = _field_order_problem(sent, model, "manifest")
    if problem:
        raise CheckFailed(f"{problem} (fields in the order of chapter 8)")
    return f"{len(raw)} bytes, as the reference writes them"


def _field_order_problem(sent: Any, model: Any, where: str) -> str | None:
    """Where the keys of ``sent`` come in another order than those of ``model`` (the same
    manifest as the model writes it), or ``None``."""
    if isinstance(sent, dict) and isinstance(model, dict):
        if list(sent) != list(model):
            return f"{where}: keys {list(sent)}, want {list(model)}"
        for key in sent:
            problem = _field_order_problem(sent[key], model[key], f"{where}.{key}")
            if problem:
                return problem
    elif isinstance(sent, list) and isinstance(model, list) and len(sent) == len(model):
        for i, (a, b) in enumerate(zip(sent, model, strict=True)):
            problem = _field_order_problem(a, b, f"{where}[{i}]")
            if problem:
                return problem
    return None


def _pools_problems(raw: Any) -> list[str]:
    if not isinstance(raw, bytes):
        return [f"pools is {type(raw).__name__}, not a byte string"]
    try:
        pools = json.loads(raw)
    except ValueError as exc:
        return [f"pools is not JSON: {exc}"]
    if not isinstance(pools, dict):
        return ["pools is not a JSON object"]
    problems = []
    if "all" not in pools:
        problems.append("no 'all' entry")
    for name, entry in pools.items():
        if not isinstance(entry, dict):
            problems.append(f"{name}: not an object")
            continue
        for field in ("declared", "configured", "active", "queued"):
            if type(entry.get(field)) is not int:
                problems.append(f"{name}.{field} = {entry.get(field)!r} (want an integer)")
        if "caps" in entry and not (
            isinstance(entry["caps"], list) and all(isinstance(c, str) for c in entry["caps"])
        ):
            problems.append(f"{name}.caps is not a list of cap URNs")
    return problems


@check("HSK-9", "HELLO pools present and well-formed", rules=("HSK-9", "HSK-23"), ck="CK-06")
def pools_present(ctx: CheckContext) -> str:
    raw = meta_of(target_hello(ctx)).get("pools")
    problems = _pools_problems(raw)
    if problems:
        raise CheckFailed("; ".join(problems[:4]))
    assert isinstance(raw, bytes)
    return f"{len(json.loads(raw))} pool entries including 'all'"


def _pools_order_problem(raw: Any) -> str | None:
    try:
        pools = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(pools, dict):
        return None
    # The singletons' own order is not judged: the reference sorts them by the cap URN
    # as registered, while the keys are canonical URNs, so no rule on the keys alone holds.
    names = list(pools)
    single = [n for n in names if n != "all" and not _is_shared(pools[n])]
    shared = [n for n in names if n != "all" and _is_shared(pools[n])]
    want = single + sorted(shared) + (["all"] if "all" in pools else [])
    if names == want:
        return None
    return (
        f"pools in order {names} (want the singleton pools, then shared pools by name, "
        f"then all: {want})"
    )


def _is_shared(entry: Any) -> bool:
    return isinstance(entry, dict) and "caps" in entry


@check("HSK-24", "pools entries ordered: singletons, shared by name, all", "SHOULD", ck="CK-06")
def pools_ordered(ctx: CheckContext) -> str:
    raw = meta_of(target_hello(ctx)).get("pools")
    if _pools_problems(raw):
        raise CheckSkipped("pools is not well-formed (HSK-9 reports it)")
    problem = _pools_order_problem(raw)
    if problem:
        raise CheckFailed(problem)
    return "singleton pools, then shared pools by name, then all"


@check(
    "HSK-6",
    "Invalid host HELLO: nothing written, non-zero exit",
    rules=("HSK-6", "HSK-4"),
    ck="CK-07",
    procs=2,
)
def bad_host_hello(ctx: CheckContext) -> str:
    variants: dict[str, dict[str, Any]] = {
        "version 5": {**Limits().to_meta(), "version": 5},
        "no initial_credit": {
            k: v for k, v in {**Limits().to_meta(), "version": 6}.items() if k != "initial_credit"
        },
    }

    def attempt(label: str, meta: dict[str, Any]) -> str | None:
        s = ctx.spawn()
        s.send(Frame(frame_type=FrameType.HELLO, id=ZERO_ID, meta=meta))
        rc = s.wait_exit(ctx.deadline)
        written = [r.frame.frame_type.name for r in s.snapshot()]
        if written:
            return f"HELLO with {label}: the cartridge wrote {written}"
        if rc is None:
            return f"HELLO with {label}: the cartridge is still running"
        if rc == 0:
            return f"HELLO with {label}: exit status 0"
        return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(variants)) as pool:
        problems = [p for p in pool.map(lambda kv: attempt(*kv), variants.items()) if p]
    if problems:
        raise CheckFailed("; ".join(problems))
    return "version 5 and a missing limit: silent, non-zero exit"


@check("HSK-14", "Identity echo correct", rules=("HSK-14", "HSK-16"), ck="CK-08")
def identity_echo(ctx: CheckContext) -> str:
    ctx.shared().identity()
    return "32-byte random nonce echoed"


@check(
    "REQ-16",
    "Identity echo correct when the nonce chunk is split",
    rules=("REQ-16", "HSK-14"),
    ck="CK-09",
)
def identity_split(ctx: CheckContext) -> str:
    conn = ctx.shared()
    for at in (1, 16, 31):
        try:
            conn.identity(split_at=at)
        except CheckFailed as exc:
            raise CheckFailed(f"nonce split at byte {at}: {exc.detail}") from None
    return "nonce split at bytes 1, 16 and 31: echoed whole"


@attrs.frozen(kw_only=True)
class _NoPolicy:
    """What HSK-19 and HSK-20 judge, from one process set up without POLICY."""

    refusal: str | None  #: HSK-20's problem, or None
    answers: list[str]  #: frames that answered the three POLICY frames (HSK-19)
    policy_problem: str | None  #: HSK-19's other problem (no service after POLICY), or None


def _no_policy_scenario(ctx: CheckContext) -> _NoPolicy:
    """HELLO + identity, a REQ before any POLICY (HSK-20), then three POLICY frames and an
    identity request (HSK-19: anything else read before its END answered a POLICY). When
    the REQ step leaves the process dead, HSK-19 gets a fresh one."""
    conn = ctx.ready(policy=False)
    refusal: str | None = None
    try:
        ex = conn.exchange(PROBE_CAP, [b"\x41x"], xid=MessageId(5))
        t = ex.terminal
        if t is None or t.frame_type is not FrameType.ERR:
            refusal = f"REQ before POLICY got {ex.describe()} (want ERR PROTOCOL_VIOLATION)"
        elif meta_of(t).get("code") != ErrorCode.PROTOCOL_VIOLATION:
            refusal = f"ERR code {meta_of(t).get('code')!r} (want PROTOCOL_VIOLATION)"
        else:
            conn.identity()
    except CheckFailed as exc:
        refusal = exc.detail
    if not conn.session.alive():
        conn = ctx.ready(policy=False)
    conn.send(*(build.policy(word) for word in ("offline", "no_telemetry", "full")))
    # the identity request after them is the barrier: an answer to a POLICY arrives among
    # the frames read before the identity's END (an event, not a quiet period)
    answers: list[str] = []
    problem: str | None = None
    try:
        ex = conn.identity()
        answers = [f.frame_type.name for f in ex.others if f.frame_type is not FrameType.CREDIT]
    except CheckFailed as exc:
        problem = f"after POLICY: {exc.detail}"
    return _NoPolicy(refusal=refusal, answers=answers, policy_problem=problem)


def _no_policy(ctx: CheckContext) -> _NoPolicy:
    return ctx.run.once("no-policy", lambda: _no_policy_scenario(ctx), ctx.deadline)


@check("HSK-19", "POLICY accepted silently", ck="CK-10", procs=1)
def policy_accepted(ctx: CheckContext) -> str:
    got = _no_policy(ctx)
    if got.answers:
        raise CheckFailed(f"POLICY was answered with {got.answers}")
    if got.policy_problem:
        raise CheckFailed(got.policy_problem)
    return "three POLICY frames: no answer, requests still served"


@check("HSK-20", "REQ before POLICY refused", ck="CK-11")
def req_before_policy(ctx: CheckContext) -> str:
    got = _no_policy(ctx)
    if got.refusal:
        raise CheckFailed(got.refusal)
    return "ERR PROTOCOL_VIOLATION, then still serving"


#: A cap no cartridge handles (a unique tag makes accidental dispatch impossible).
PROBE_CAP = "cap:in=media:;conformance-probe=unhandled-7f3a;out=media:"


@check(
    "HSK-11",
    "HELLO after the handshake refused, service continues",
    rules=("HSK-11", "ERR-7"),
    ck="CK-34",
)
def late_hello(ctx: CheckContext) -> str:
    conn = ctx.shared()  # a conformant target keeps serving; a failure retires the session
    conn.send(build.hello(Limits()))
    try:
        f = conn.session.expect(lambda f: f.id == ZERO_ID, ctx.deadline)
    except (WaitTimeout, TargetGone) as exc:
        raise CheckFailed(f"no ERR for the late HELLO ({exc})") from None
    meta = meta_of(f)
    if f.frame_type is not FrameType.ERR or meta.get("code") != ErrorCode.PROTOCOL_ERROR:
        raise CheckFailed(
            f"late HELLO answered with {f.frame_type.name} {meta.get('code')!r} "
            "(want ERR PROTOCOL_ERROR)"
        )
    conn.identity()
    return "ERR PROTOCOL_ERROR id 0, then still serving"


@check(
    "CLI-2",
    "CLI `manifest` equals the HELLO manifest",
    rules=("CLI-2", "MAN-2"),
    ck="CK-37",
    procs=1,
)
def cli_manifest(ctx: CheckContext) -> str:
    raw = meta_of(target_hello(ctx)).get("manifest")
    try:
        hello_manifest = json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:
        hello_manifest = None
    if hello_manifest is None:
        raise CheckSkipped("the HELLO manifest is not JSON (see HSK-8)")
    rc, stdout = run_capture([*ctx.argv, "manifest"], max(1.0, ctx.remaining()))
    if rc is None:
        raise CheckFailed("`manifest` did not finish in time")
    if rc != 0:
        raise CheckFailed(f"`manifest` exited {rc}")
    try:
        printed = json.loads(stdout)
    except ValueError as exc:
        raise CheckFailed(f"`manifest` output is not JSON: {exc}") from None
    if printed != hello_manifest:
        printed, hello_manifest = _canonical_urns(printed), _canonical_urns(hello_manifest)
    if printed != hello_manifest:
        diff = sorted(
            k for k in set(printed) | set(hello_manifest) if printed.get(k) != hello_manifest.get(k)
        )
        raise CheckFailed(f"CLI manifest differs from HELLO's in {diff}")
    return "same JSON object (cap URNs compared in canonical form)"


def _canonical_urns(manifest: Any) -> Any:
    """The manifest with every cap's ``urn`` in canonical text, so that two spellings of
    the same cap URN (tag order, quoting) compare equal."""
    from ..urn import CapUrn

    if not isinstance(manifest, dict):
        return manifest
    out = json.loads(json.dumps(manifest))
    for group in out.get("cap_groups", []) or []:
        for cap in group.get("caps", []) if isinstance(group, dict) else []:
            if isinstance(cap, dict) and isinstance(cap.get("urn"), str):
                with contextlib.suppress(Exception):  # an unparsable URN stays as written
                    cap["urn"] = str(CapUrn.parse(cap["urn"]))
    return out
