"""What a check works with: fresh target processes set up as a host would, and a request
driver that speaks the flow-control rules on the kit's side.

Scenario checks read the target's answers *leniently* (no checksum verification, payloads
that are not one CBOR item taken as raw bytes, routing ids ignored when matching): the
frame audit (``_audit``) judges those structural rules once for every session, so one
defect fails exactly the check that owns its rule.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import cbor2

from ..protocol import (
    DEFAULT_LIMITS,
    IDENTITY_CAP,
    IDENTITY_NONCE_LEN,
    ErrorReport,
    Frame,
    FrameType,
    IdentityCheck,
    Limits,
    MessageId,
)
from ..protocol import (
    frames as build,
)
from ._outcomes import CheckFailed
from ._session import Session, TargetGone, WaitTimeout

__all__ = ("CheckContext", "Conn", "Exchange", "RunState", "lenient_value")

_T = TypeVar("_T")


def lenient_value(payload: bytes) -> bytes:
    """The data a scalar chunk carries, as bytes: a CBOR bstr/tstr's contents, any other
    single item re-encoded, anything undecodable taken raw (the audit reports that)."""
    fp = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(fp).decode()
    except Exception:
        return payload
    if fp.tell() != len(payload):
        return payload
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return payload


@attrs.define(kw_only=True)
class Exchange:
    """What came back for one request driven by :meth:`Conn.exchange`."""

    rid: MessageId
    frames: list[Frame] = attrs.field(factory=list)
    terminal: Frame | None = None
    data: dict[str, bytearray] = attrs.field(factory=dict)
    starts: dict[str, Frame] = attrs.field(factory=dict)
    input_grants: list[int] = attrs.field(factory=list)
    response_grants: int = 0
    credit_overruns: list[str] = attrs.field(factory=list)
    others: list[Frame] = attrs.field(factory=list)
    input_chunks_sent: int = 0

    @property
    def ok(self) -> bool:
        """Ended with END."""
        return self.terminal is not None and self.terminal.frame_type is FrameType.END

    @property
    def output(self) -> bytes:
        """All response data joined (streams in order of opening)."""
        return b"".join(bytes(v) for v in self.data.values())

    def describe(self) -> str:
        """A short account of the terminal for failure messages."""
        t = self.terminal
        if t is None:
            return "no END or ERR"
        if t.frame_type is FrameType.ERR:
            meta = t.meta or {}
            return f"ERR {meta.get('code')!r}: {meta.get('message')!r}"
        return "END"


class RunState:
    """Shared by every check of one run: the audit's findings and the cached HELLO."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.findings: dict[str, list[str]] = {}
        self.audited_sessions = 0
        #: Frames the audit judged, over every session (none: nothing to audit).
        self.audited_frames = 0
        self.baseline_done = False
        self.hello: Frame | None = None
        self.seen: set[str] = set()
        #: The ERRs of the manifest sweep's requests (ERR-4 judges typed errors from them).
        self.sweep_errors: list[ErrorReport] = []
        #: ``(cap URN, stdin media, ERR)`` of each sweep request that failed (CLI-6 runs the
        #: same cap in CLI mode and compares).
        self.sweep_failures: list[tuple[str, str, ErrorReport]] = []
        #: One ready process shared, one check at a time, by the checks that leave a
        #: conformant target in a clean state (saves a process start per check).
        self.shared_locks: dict[Limits, threading.Lock] = {}
        self.shared_conns: dict[Limits, Conn] = {}
        self.shared_all: list[Conn] = []
        #: Every process started in the run (killed and reaped when the run ends, whatever
        #: happens, so that nothing is left behind).
        self.sessions: list[Session] = []
        self.stopped = False
        #: Why a shared session got no HELLO, once one did not: later checks that want a
        #: shared session fail at once with the same detail instead of waiting again.
        self.no_hello: str | None = None
        self._once: dict[str, tuple[threading.Event, list[Any]]] = {}

    def track(self, session: Session) -> Session:
        """Remember ``session`` so that the end of the run kills it.

        :raises CheckFailed: the run was stopped (the session is killed at once).
        """
        with self.lock:
            self.sessions.append(session)
            stopped = self.stopped
        if stopped:
            session.kill()
            raise CheckFailed("the run was stopped")
        return session

    def stop(self) -> None:
        """Stop the run: kill every process and refuse to start new ones."""
        with self.lock:
            self.stopped = True
        self.kill_all()

    def kill_all(self) -> None:
        """Kill and reap every process of the run (idempotent)."""
        with self.lock:
            sessions = list(self.sessions)
        for s in sessions:
            s.kill()

    def once(self, key: str, compute: Callable[[], _T], deadline: float) -> _T:
        """The result of ``compute`` for ``key``, computed by the first caller only; later
        callers wait for it (until ``deadline``). Lets two checks judge one scenario (one
        process) from their own angles. An exception is re-raised in every caller.

        :raises CheckFailed: the scenario did not finish before ``deadline``.
        """
        with self.lock:
            entry = self._once.get(key)
            first = entry is None
            if entry is None:
                entry = self._once[key] = (threading.Event(), [])
        done, box = entry
        if first:
            try:
                box.append((True, compute()))
            except BaseException as exc:
                box.append((False, exc))
            finally:
                done.set()
        elif not done.wait(max(0.0, deadline - time.monotonic())):
            raise CheckFailed(f"the shared scenario {key!r} did not finish in time")
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def known_defect(self, rule: str, findings: list[str]) -> str | None:
        """The reference defect an audit finding matches, if any."""
        from ._known import audit_defect

        return audit_defect(rule, findings)

    def add(self, rule: str, detail: str) -> None:
        """Record one audit finding."""
        with self.lock:
            self.findings.setdefault(rule, []).append(detail)


class Conn:
    """A target process after (optionally) HELLO, identity and POLICY."""

    def __init__(self, session: Session, ctx: CheckContext) -> None:
        self.session = session
        self.ctx = ctx
        self.hello: Frame | None = None
        self.limits: Limits = DEFAULT_LIMITS
        self.offered: Limits = DEFAULT_LIMITS
        self.requests: dict[MessageId, MessageId | None] = {}
        self._pending: list[Frame] = []

    # -- basic IO ------------------------------------------------------------------------

    def send(self, *frames: Frame) -> None:
        """Send frames, remembering each REQ's routing id for the audit."""
        for f in frames:
            if f.frame_type is FrameType.REQ:
                self.requests[f.id] = f.routing_id
        self.session.send(*frames)

    def next(self, deadline: float) -> Frame:
        """The next frame (frames put back by :meth:`push_back` first)."""
        if self._pending:
            return self._pending.pop(0)
        return self.session.recv(deadline)

    def push_back(self, frame: Frame) -> None:
        """Return a frame to be read again by the next :meth:`next`."""
        self._pending.append(frame)

    def deadline(self, seconds: float | None = None) -> float:
        """A deadline ``seconds`` from now, capped by the check's own deadline."""
        d = self.ctx.deadline
        if seconds is not None:
            d = min(d, time.monotonic() + seconds)
        return d

    # -- setup ---------------------------------------------------------------------------

    def handshake(self, limits: Limits = DEFAULT_LIMITS) -> Frame:
        """Send HELLO and read the cartridge's HELLO (which must come first)."""
        self.offered = limits
        self.send(build.hello(limits))
        try:
            frame = self.next(self.deadline())
        except WaitTimeout:
            raise CheckFailed("no HELLO from the cartridge in time") from None
        except TargetGone as exc:
            raise CheckFailed(f"no HELLO: {exc}{self.ctx.stderr_hint(self.session)}") from None
        if frame.frame_type is not FrameType.HELLO:
            raise CheckFailed(f"first frame is {frame.frame_type.name}, not HELLO")
        self.hello = frame
        meta = frame.meta or {}
        values = {}
        for name in ("max_frame", "max_chunk", "max_reorder_buffer", "initial_credit"):
            v = meta.get(name)
            values[name] = (
                min(v, getattr(limits, name)) if type(v) is int and v > 0 else getattr(limits, name)
            )
        self.limits = Limits(**values)
        return frame

    def identity(self, *, split_at: int | None = None, nonce: bytes | None = None) -> Exchange:
        """Run one identity request exactly as a host sends it (``IdentityCheck`` frames,
        stream ``identity-verify``, no routing id) and judge the echo leniently."""
        nonce = nonce if nonce is not None else os.urandom(IDENTITY_NONCE_LEN)
        check = IdentityCheck(nonce=nonce)
        ex = self.exchange(
            IDENTITY_CAP, [], rid=check.rid, prebuilt=check.frames(split_at=split_at)
        )
        if not ex.ok:
            raise CheckFailed(f"identity request failed: {ex.describe()}")
        if ex.output != check.nonce:
            raise CheckFailed(
                f"identity echo differs: sent {check.nonce.hex()[:16]}..., "
                f"got {ex.output.hex()[:16]}... ({len(ex.output)} bytes)"
            )
        return ex

    def setup(self, limits: Limits = DEFAULT_LIMITS, *, policy: bool = True) -> Conn:
        """HELLO, identity check and (by default) POLICY ``offline``."""
        self.handshake(limits)
        try:
            self.identity()
        except CheckFailed as exc:
            raise CheckFailed(f"setup: {exc.detail}") from None
        if policy:
            self.send(build.policy("offline"))
        return self

    # -- requests ------------------------------------------------------------------------

    def exchange(
        self,
        cap: str,
        payloads: Sequence[bytes],
        *,
        rid: MessageId | None = None,
        xid: MessageId | None = None,
        stream_id: str = "arg-0",
        media: str = "media:",
        is_sequence: bool = False,
        unbounded: bool = False,
        respond: str = "eager",
        obey_credit: bool = True,
        finish: bool = True,
        until_terminal: bool = True,
        quiet: float = 0.25,
        deadline: float | None = None,
        send_req: bool = True,
        first_index: int = 0,
        prebuilt: Sequence[Frame] | None = None,
        cancel_on_peer_call: bool = False,
    ) -> Exchange:
        """Send one request whose single argument stream carries ``payloads`` (one CHUNK
        each), obeying the cartridge's input credit, and read the response to its terminal.

        ``respond``: ``"eager"`` grants one response credit per CHUNK at once, ``"slow"``
        grants one credit only after ``quiet`` seconds of silence, ``"none"`` never grants.
        Every response CHUNK beyond the window granted so far is noted in
        ``credit_overruns``. ``finish=False`` leaves the body open (no STREAM_END/END).
        ``unbounded`` opens the input stream with key 20 and ends it without key 15.
        ``cancel_on_peer_call`` cancels the request as soon as the target opens a peer
        request of its own (the kit serves none, so the handler would wait for it).
        """
        rid = rid or MessageId.new()
        dl = deadline if deadline is not None else self.deadline()
        ex = Exchange(rid=rid)
        window_in = self.limits.initial_credit
        allowed: dict[str, int] = {}
        got: dict[str, int] = {}
        if prebuilt is not None:
            self.send(*prebuilt)
            send_req, finish, payloads = False, False, []
        if send_req:
            self.send(build.req(rid, cap, xid=xid))
            self.send(
                build.stream_start(
                    rid,
                    stream_id,
                    media,
                    xid=xid,
                    is_sequence=is_sequence or None,
                    unbounded=unbounded or None,
                )
            )
        todo = list(payloads)
        index = first_index
        ended = False

        def pump() -> None:
            nonlocal index, window_in, ended
            out: list[Frame] = []
            while todo and (window_in > 0 or not obey_credit):
                out.append(build.chunk(rid, stream_id, index, todo.pop(0), xid=xid))
                index += 1
                window_in -= 1
                ex.input_chunks_sent += 1
            if not todo and finish and not ended:
                out.append(build.stream_end(rid, stream_id, None if unbounded else index, xid=xid))
                out.append(build.end(rid, response=False, xid=xid))
                ended = True
            if out:
                self.send(*out)

        pump()
        if not until_terminal:
            return ex
        while ex.terminal is None:
            slow = respond == "slow"
            wait_until = min(dl, time.monotonic() + quiet) if slow else dl
            try:
                frame = self.next(wait_until)
            except WaitTimeout:
                if time.monotonic() >= dl:
                    raise CheckFailed(
                        f"request stalled: no terminal within the timeout "
                        f"(sent {ex.input_chunks_sent}/{len(payloads)} input chunks, "
                        f"received {sum(got.values())} response chunks)"
                    ) from None
                for sid in list(ex.starts):  # slow: one credit per quiet period
                    allowed[sid] = allowed.get(sid, self.limits.initial_credit) + 1
                    ex.response_grants += 1
                    self.send(build.credit(rid, 1, "response", stream_id=sid, xid=xid))
                continue
            except TargetGone as exc:
                raise CheckFailed(
                    f"target ended during a request: {exc}{self.ctx.stderr_hint(self.session)}"
                ) from None
            if frame.id != rid:
                ex.others.append(frame)
                if cancel_on_peer_call and frame.frame_type is FrameType.REQ:
                    cancel_on_peer_call = False
                    self.send(build.cancel(rid, xid=xid))
                continue
            ft = frame.frame_type
            if ft is FrameType.CREDIT:
                if frame.stream_id in (None, stream_id):
                    ex.input_grants.append(frame.credit or 0)
                    window_in += frame.credit or 0
                    pump()
                continue
            if not ft.is_flow:
                ex.others.append(frame)
                continue
            ex.frames.append(frame)
            if ft is FrameType.STREAM_START and frame.stream_id is not None:
                ex.starts[frame.stream_id] = frame
                ex.data.setdefault(frame.stream_id, bytearray())
                allowed.setdefault(frame.stream_id, self.limits.initial_credit)
            elif ft is FrameType.CHUNK and frame.stream_id is not None:
                sid = frame.stream_id
                got[sid] = got.get(sid, 0) + 1
                lim = allowed.setdefault(sid, self.limits.initial_credit)
                if got[sid] > lim:
                    ex.credit_overruns.append(
                        f"CHUNK #{got[sid]} on {sid} with only {lim} credits granted"
                    )
                start = ex.starts.get(sid)
                payload = frame.payload or b""
                seq = bool(start is not None and start.is_sequence)
                ex.data.setdefault(sid, bytearray()).extend(
                    payload if seq else lenient_value(payload)
                )
                if respond == "eager":
                    allowed[sid] = lim + 1
                    ex.response_grants += 1
                    self.send(build.credit(rid, 1, "response", stream_id=sid, xid=xid))
            elif ft in (FrameType.END, FrameType.ERR):
                ex.terminal = frame
        return ex

    def heartbeat(
        self, hid: MessageId | None = None, *, seconds: float | None = None
    ) -> Frame | None:
        """Send a HEARTBEAT and wait for the reply (same id); other frames are put back."""
        hid = hid or MessageId.new()
        self.send(build.heartbeat(hid))
        held: list[Frame] = []
        try:
            while True:
                f = self.session.recv(self.deadline(seconds))
                if f.frame_type is FrameType.HEARTBEAT and f.id == hid:
                    return f
                held.append(f)
        except (WaitTimeout, TargetGone):
            return None
        finally:
            self._pending.extend(held)


class CheckContext:
    """Handed to each check: the target, the deadline, and process management."""

    def __init__(
        self, argv: Sequence[str], *, timeout: float, run: RunState, check_id: str
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.run = run
        self.check_id = check_id
        self.sessions: list[Session] = []
        self.conns: list[Conn] = []
        self._lock = threading.Lock()
        self.cancelled = False
        #: Audit rules not judged on this check's sessions (the check reports them itself).
        self.audit_skip: set[str] = set()
        self._holds_shared: Limits | None = None

    def spawn(self, *args: str) -> Session:
        """Start a fresh target process (killed when the check ends)."""
        with self._lock:
            if self.cancelled:
                raise CheckFailed("check timed out")
            s = self.run.track(Session(self.argv, args=args, label=self.check_id))
            self.sessions.append(s)
            return s

    def conn(self) -> Conn:
        """A fresh process wrapped for frame exchange (nothing sent yet)."""
        c = Conn(self.spawn(), self)
        self.conns.append(c)
        return c

    def ready(self, limits: Limits = DEFAULT_LIMITS, *, policy: bool = True) -> Conn:
        """A fresh process after HELLO, identity and POLICY."""
        return self.conn().setup(limits, policy=policy)

    def shared(self, limits: Limits = DEFAULT_LIMITS) -> Conn:
        """The run's shared ready process for ``limits`` (POLICY sent), held by this check
        until it ends; a check that fails or times out retires it. A check holds at most
        one shared process."""
        run = self.run
        if self._holds_shared is None:
            with run.lock:
                lock = run.shared_locks.setdefault(limits, threading.Lock())
            wait = max(1.0, self.timeout * 4)
            self.deadline = time.monotonic() + wait  # the watchdog must not count the wait
            if not lock.acquire(timeout=wait):
                raise CheckFailed("the shared session stayed busy")
            self._holds_shared = limits
            self.deadline = time.monotonic() + self.timeout  # waiting for it is not our time
        elif self._holds_shared != limits:
            raise RuntimeError("a check may hold one shared session")
        conn = run.shared_conns.get(limits)
        if conn is None or not conn.session.alive():
            if run.no_hello is not None:  # a target that never said HELLO: no second wait
                raise CheckFailed(run.no_hello)
            with self._lock:
                if self.cancelled:
                    raise CheckFailed("check timed out")
            conn = Conn(self.run.track(Session(self.argv, label="shared")), self)
            run.shared_conns[limits] = conn
            run.shared_all.append(conn)
            try:
                conn.setup(limits)
            except BaseException as exc:
                conn.session.kill()  # never hand a half-set-up process to the next check
                run.shared_conns.pop(limits, None)
                if isinstance(exc, CheckFailed) and conn.hello is None:
                    run.no_hello = exc.detail
                raise
            finally:
                if conn.hello is not None and run.hello is None and limits == DEFAULT_LIMITS:
                    run.hello = conn.hello
        conn.ctx = self
        conn._pending.clear()
        return conn

    def release_shared(self, *, broken: bool) -> None:
        """Give the shared process back (killed first when ``broken``)."""
        limits = self._holds_shared
        if limits is None:
            return
        conn = self.run.shared_conns.get(limits)
        if conn is not None:
            if broken or not conn.session.alive():
                conn.session.kill()
                self.run.shared_conns.pop(limits, None)
            else:
                conn.session.drain(0.02)
                conn._pending.clear()
        self._holds_shared = None
        self.run.shared_locks[limits].release()

    def remaining(self) -> float:
        """Seconds left before the check's deadline."""
        return max(0.0, self.deadline - time.monotonic())

    def stderr_hint(self, session: Session) -> str:
        """The last stderr line of a session, as a suffix for a detail message."""
        lines = [ln for ln in session.stderr_text.strip().splitlines() if ln.strip()]
        return f" (stderr: {lines[-1][:120]})" if lines else ""

    def close(self) -> None:
        """Kill every process the check started."""
        with self._lock:
            self.cancelled = True
            sessions = list(self.sessions)
        for s in sessions:
            s.kill()
        held = self.run.shared_conns.get(self._holds_shared) if self._holds_shared else None
        if held is not None:
            held.session.kill()


def meta_of(frame: Frame) -> dict[str, Any]:
    """A frame's meta, never None."""
    return dict(frame.meta or {})
