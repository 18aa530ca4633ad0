"""Credit, request bodies and unrouted frames against the formal model.

Three areas, each run on our sans-IO cores with real frames:

* **credit** — the receiver's window (``Window``: ``arrive``, ``consume``, ``continued``,
  ``flush``, ``opened``) against :class:`BodyReceiver` fed CHUNK frames and told what the
  consumer took; the sender's gate (``Gate``: ``acquire``, ``grant``) and the sender's
  ``ledger`` against :class:`OutgoingStream`'s credit; ``negotiate`` against
  :meth:`Limits.negotiate`.
* **request phases and terminals** — the frame kinds (``code``, ``of_code``, ``is_flow``,
  ``is_terminal``, ``terminal_of``); ``check``, the first violation in what a responder
  emitted, against :class:`BodyReceiver` fed the same frames; ``write``, whether a frame
  after its flow's terminal is still sent, against :class:`SeqAssigner`.
* **unrouted frames** — ``dispose`` (route, straggler, no route) against
  :class:`HostConnection`'s routing of a cartridge's frames by request id.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import capdag._formal as F
from _oracle_common import AreaResult

from cartridge_runtime.protocol import (
    BodyReceiver,
    CartridgeConnection,
    CreditViolationError,
    Frame,
    FrameType,
    HandshakeError,
    HostConnection,
    Limits,
    MessageId,
    OutgoingStream,
    PoolAdmission,
    ProtocolError,
    RequestAdmitted,
    RequestState,
    SeqAssigner,
    StartupProgress,
    frames,
)

#: Our frame types by the model's constructor class.
_BY_CLASS = {type(F.of_code(ft.value)): ft for ft in FrameType}


def model_frame_type(ft: FrameType) -> Any:
    return F.of_code(ft.value)


# --------------------------------------------------------------------------- credit


def _window(res: AreaResult, rng: random.Random) -> None:
    """One random run of a receiver's window over one stream: every step is a case."""
    window = rng.choice((1, 2, 3, 4, 5, 8, 32))
    rid = MessageId.new()
    rcv = BodyReceiver(rid, initial_credit=window, expect_req=False)
    rcv.receive(frames.stream_start(rid, "s", "media:"))
    w = F.window_opened(window)
    res.cases += 1
    res.check(f"opened {window}: batch", rcv.batch, w.batch)
    index = 0
    steps: list[str] = []
    for _ in range(30):
        roll = rng.random()
        if roll < 0.45:
            # A CHUNK arrives (an empty one is given back at once: arrive, then continued).
            empty = rng.random() < 0.2
            steps.append("empty chunk" if empty else "chunk")
            payload = b"" if empty else b"\x41a"
            arrived = F.window_arrive(w)
            theirs = "accepted" if isinstance(arrived, F.CreditArrivalAccepted) else "violation"
            try:
                rcv.receive(frames.chunk(rid, "s", index, payload))
            except CreditViolationError:
                res.check(f"arrive [{steps}]", "violation", theirs)
                return
            res.check(f"arrive [{steps}]", "accepted", theirs)
            if not isinstance(arrived, F.CreditArrivalAccepted):
                return
            w = arrived.window
            index += 1
            if empty:
                got = F.continued(w)
                w = got.window
                res.check(f"continued [{steps}]", _grants(rcv), [got.grant])
            else:
                res.check(f"arrive [{steps}]: no grant", _grants(rcv), [])
        elif roll < 0.85:
            steps.append("consume")
            got = F.consume(w)
            w = got.window
            rcv.consumed("s")
            res.check(f"consume [{steps}]", _grants(rcv), [got.grant] if got.grant else [])
        else:
            steps.append("flush")
            got = F.flush(w)
            w = got.window
            rcv.flush_credit("s")
            res.check(f"flush [{steps}]", _grants(rcv), [got.grant] if got.grant else [])
        res.cases += 1


def _grants(rcv: BodyReceiver) -> list[int]:
    return [int(f.credit or 0) for f in rcv.data_to_send()]


def _gate(res: AreaResult, rng: random.Random) -> None:
    """One random run of a sender's credit: take one credit per CHUNK, apply grants."""
    window = rng.randint(1, 8)
    out = OutgoingStream(MessageId.new(), "s", "media:", max_chunk=16, initial_credit=window)
    gate = F.gate_opened(window)
    remaining = window
    res.cases += 1
    res.check(f"gate opened {window}", out.credit, gate.available)
    for _ in range(30):
        if rng.random() < 0.6:
            got = F.acquire(gate, 1)
            took = out.take_credit()
            res.check(f"acquire 1 of {gate.available}", took, isinstance(got, F.AcquireAcquired))
            if isinstance(got, F.AcquireAcquired):
                gate = got.gate
                remaining = F.ledger(remaining, F.FrameTypeChunk(), 0)
        else:
            n = rng.randint(0, 20)
            out.grant(n)
            gate = F.grant(gate, n)
            remaining = F.ledger(remaining, F.FrameTypeCredit(), n)
        res.cases += 1
        res.check("gate available", out.credit, gate.available)
        res.check("ledger", out.credit, remaining)


def _negotiate(res: AreaResult) -> None:
    for ours, theirs in itertools.product(range(0, 40), repeat=2):
        res.cases += 1
        try:
            got: int | None = (
                Limits(initial_credit=ours).negotiate(Limits(initial_credit=theirs)).initial_credit
            )
        except HandshakeError:
            got = None
        res.check(f"negotiate {ours} {theirs}", got, F.negotiate(ours, theirs))


class _Handlers:
    """One cap, served by its own handler."""

    def find_handler(self, cap_urn: str) -> tuple[str, str] | None:
        return (cap_urn, "echo") if cap_urn == ECHO else None

    def is_identity(self, cap_urn: str) -> bool:
        return False

    def pool_name(self, handler_urn: str) -> str:
        return handler_urn


class _Sink:
    def __init__(self) -> None:
        self.granted = 0

    def grant(self, n: int) -> None:
        self.granted += n

    def deliver(self, event: object, credit: int = 0) -> None:
        raise AssertionError("no peer call is open in these runs")


ECHO = "cap:in=media:;op=echo;out=media:"


class _Pools(PoolAdmission[object]):
    """The admission table with the two answers a heartbeat and the HELLO ask for."""

    def to_json_bytes(self) -> bytes:
        return b'{"all":{}}'

    def apply_desired_json(self, data: bytes | str) -> None:
        raise AssertionError("no desired capacities in these runs")


STREAM_IDS = ("a", "b", "c")


def _grant_targets(res: AreaResult) -> None:
    """Which output stream a CREDIT reaches in the cartridge's connection: every set of
    open output streams (up to three) and every way of naming one (or none, or a stranger)."""
    pools = _Pools()
    pools.add_pool("all", 0)
    conn = CartridgeConnection[str](
        limits=Limits(),
        handlers=_Handlers(),
        pools=pools,
        manifest=b'{"name":"t"}',
        max_open_requests=1000,
    )
    conn.receive(frames.hello(Limits()))
    conn.receive(frames.policy("offline"))
    for k in range(len(STREAM_IDS) + 1):
        for streams in itertools.combinations(STREAM_IDS, k):
            for named in (None, *STREAM_IDS, "d"):
                event = conn.receive(frames.req(MessageId.new(), ECHO))
                assert isinstance(event, RequestAdmitted)
                request = event.request
                sinks = {s: _Sink() for s in streams}
                request.outputs.update(sinks)
                conn.receive(frames.credit(request.rid, 1, "response", stream_id=named))
                reached = [s for s, sink in sinks.items() if sink.granted]
                ours = None if not reached else reached[0]
                got = F.grant_target(list(streams), named)
                res.cases += 1
                res.check(
                    f"grant_target {list(streams)} {named}",
                    (len(reached) <= 1, ours),
                    (True, None if got is None else got.value),
                )


def run_credit(n: int, rng: random.Random) -> AreaResult:
    res = AreaResult("credit")
    _negotiate(res)
    _grant_targets(res)
    while res.cases < n:
        if rng.random() < 0.5:
            _window(res, rng)
        else:
            _gate(res, rng)
    return res


# --------------------------------------------------------------------------- request bodies

#: What a responder may emit, in the model's words, over streams ``a`` and ``b``.
Emitted = tuple[Any, ...]


def _alphabet() -> list[Emitted]:
    out: list[Emitted] = [("fin",), ("err",), ("other",)]
    for s in "ab":
        out.append(("start", s))
        out.extend(("chunk", s, i) for i in range(3))
        out.extend(("end", s, c) for c in (None, 0, 1, 2))
    return out


ALPHABET = _alphabet()


def _model_emitted(e: Emitted) -> Any:
    kind = e[0]
    if kind == "start":
        return F.EmittedStreamStart(e[1])
    if kind == "chunk":
        return F.EmittedChunk(e[1], e[2])
    if kind == "end":
        return F.EmittedStreamEnd(e[1], e[2])
    if kind == "fin":
        return F.EmittedFin()
    if kind == "err":
        return F.EmittedErr()
    return F.EmittedOther()


def _frame(rid: MessageId, e: Emitted) -> Frame:
    kind = e[0]
    if kind == "start":
        return frames.stream_start(rid, e[1], "media:")
    if kind == "chunk":
        return frames.chunk(rid, e[1], e[2], b"\x41a")
    if kind == "end":
        return frames.stream_end(rid, e[1], e[2])
    if kind == "fin":
        return frames.end(rid)
    if kind == "err":
        return frames.err(rid, "HANDLER_ERROR", "failed")
    return frames.log(rid, "info", "a line")


def _violation_of(error: ProtocolError, e: Emitted, open_streams: list[str]) -> Any:
    """Our error, read as the model's violation (by its message: the kinds are one each)."""
    text = str(error)
    if "after the request ended" in text:
        return F.ViolationAfterEnd()
    if text.startswith("stream restarted"):
        return F.ViolationStreamRestarted(e[1])
    if text.startswith("stream not open"):
        return F.ViolationStreamNotOpen(e[1])
    if text.startswith("chunk out of place"):
        expected = int(text.split("expected chunk_index ")[1].split(",")[0])
        return F.ViolationChunkOutOfPlace(e[1], expected, e[2])
    if text.startswith("chunk count wrong"):
        sent = int(text.rsplit(", ", 1)[1].split(" ")[0])
        return F.ViolationChunkCountWrong(e[1], sent, e[2])
    if text.startswith("END while stream(s) still open"):
        return F.ViolationEndWithOpenStream(open_streams[0])
    return ("unmapped", text)


def ours_check(seq: list[Emitted]) -> Any:
    """The first violation :class:`BodyReceiver` finds in ``seq`` (model form), or None."""
    rid = MessageId.new()
    rcv = BodyReceiver(rid, initial_credit=1000, expect_req=False)
    for e in seq:
        open_streams = rcv.open_streams
        try:
            rcv.receive(_frame(rid, e))
        except ProtocolError as exc:
            return _violation_of(exc, e, open_streams)
    return None


def compare_check(res: AreaResult, seq: list[Emitted]) -> None:
    res.cases += 1
    res.check(f"check {seq}", ours_check(seq), F.check([_model_emitted(e) for e in seq]))


def _plausible(rng: random.Random) -> list[Emitted]:
    """A body that is mostly well formed, with a mistake now and then."""
    seq: list[Emitted] = []
    counts = {"a": 0, "b": 0}
    for s in rng.sample("ab", rng.randint(0, 2)):
        seq.append(("start", s))
        for _ in range(rng.randint(0, 3)):
            seq.append(("chunk", s, counts[s]))
            counts[s] += 1
        if rng.random() < 0.8:
            seq.append(
                ("end", s, counts[s] if rng.random() < 0.7 else rng.choice((None, 0, 1, 2, 3)))
            )
    if rng.random() < 0.3:
        seq.insert(rng.randint(0, len(seq)), ("other",))
    seq.append(rng.choice((("fin",), ("fin",), ("err",))))
    for _ in range(rng.randint(0, 2)):
        seq.insert(rng.randint(0, len(seq)), rng.choice(ALPHABET))
    return seq


def _terminals(res: AreaResult) -> None:
    """Every frame type: code, flow, terminal, and which terminal our receiver reaches."""
    for code in range(0, 64):
        res.cases += 1
        try:
            ours: FrameType | None = FrameType(code)
        except ValueError:
            ours = None
        theirs = F.of_code(code)
        res.check(f"of_code {code}", ours, None if theirs is None else _BY_CLASS[type(theirs)])
        if ours is None:
            continue
        mf = model_frame_type(ours)
        res.check(f"code {ours.name}", ours.value, F.code(mf))
        res.check(f"is_flow {ours.name}", ours.is_flow, F.is_flow(mf))
        res.check(f"is_terminal {ours.name}", ours.is_terminal, F.is_terminal(mf))
        res.check(f"terminal_of {ours.name}", _our_terminal(ours), _model_terminal(mf))


def _our_terminal(ft: FrameType) -> str | None:
    """Which end a response reaches on a frame of type ``ft`` (None: not an end)."""
    if not ft.is_terminal:
        return None
    rid = MessageId.new()
    rcv = BodyReceiver(rid, initial_credit=1, expect_req=False)
    rcv.receive(frames.end(rid) if ft is FrameType.END else frames.err(rid, "X", "failed"))
    return {RequestState.DONE: "finished", RequestState.FAILED: "failed"}[rcv.state]


def _model_terminal(mf: Any) -> str | None:
    t = F.terminal_of(mf)
    if t is None:
        return None
    return {F.TerminalFinished: "finished", F.TerminalFailed: "failed"}.get(type(t), repr(t))


def _writes(res: AreaResult, rng: random.Random) -> None:
    """Frames of two flows through one :class:`SeqAssigner`: sent or suppressed, closing."""
    seqs = SeqAssigner()
    rids = [MessageId.new(), MessageId.new()]
    over = [False, False]
    kinds = [ft for ft in FrameType if ft is not FrameType.HELLO]
    for _ in range(20):
        i = rng.randrange(2)
        ft = rng.choice(kinds)
        frame = Frame(frame_type=ft, id=rids[i])
        got = F.write(over[i], model_frame_type(ft))
        ours = seqs.number(frame)
        theirs: object = "suppress" if isinstance(got, F.WriteSuppress) else ("send", got.ends)
        sent: object = (
            "suppress" if ours is None else ("send", seqs.is_closed(rids[i]) and not over[i])
        )
        res.cases += 1
        res.check(f"write over={over[i]} {ft.name}", sent, theirs)
        if isinstance(got, F.WriteSend) and got.ends:
            over[i] = True


def run_requests(n: int, rng: random.Random) -> AreaResult:
    res = AreaResult("request phases/terminals")
    _terminals(res)
    for length in range(3):
        for seq in itertools.product(ALPHABET, repeat=length):
            if res.cases >= n:
                break
            compare_check(res, list(seq))
    while res.cases < n:
        roll = rng.random()
        if roll < 0.5:
            compare_check(res, _plausible(rng))
        elif roll < 0.7:
            compare_check(res, [rng.choice(ALPHABET) for _ in range(rng.randint(3, 6))])
        else:
            _writes(res, rng)
    return res


# --------------------------------------------------------------------------- unrouted frames


class _Counters:
    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0
        self.late_credits = 0
        self.no_route = 0
        self.protocol_errors = 0
        self.heartbeat_misses = 0


class _Flow:
    def __init__(self) -> None:
        self.frames = 0

    @property
    def xid(self) -> MessageId | None:
        return None

    def on_frame(self, frame: Frame) -> None:
        self.frames += 1


class _Origin:
    def on_requester_frame(self, frame: Frame) -> None:
        raise AssertionError("no peer call is open in these runs")


def ready_host() -> tuple[HostConnection[_Flow, _Origin], _Counters]:
    """A host connection past its start-up (HELLO, identity echo, manifest)."""
    counters = _Counters()
    conn: HostConnection[_Flow, _Origin] = HostConnection(
        limits=Limits(), policy=None, counters=counters
    )
    conn.start()
    meta: dict[str, Any] = Limits().to_meta()
    meta.update(version=6, manifest=b'{"name": "x"}', pools=b'{"all": {}}')
    ev = conn.receive_frame(
        Frame(frame_type=FrameType.HELLO, id=frames.policy("full").id, meta=meta)
    )
    assert isinstance(ev, StartupProgress)
    request = list(ev.frames)
    rid = request[0].id
    payload = next(f.payload for f in request if f.frame_type is FrameType.CHUNK) or b""
    for f in (
        frames.stream_start(rid, "echo", "media:"),
        frames.chunk(rid, "echo", 0, payload),
        frames.stream_end(rid, "echo", 1),
        frames.end(rid),
    ):
        conn.receive_frame(f)
    conn.accept_manifest()
    conn.started()
    return conn, counters


#: The frame types routed by request id that a cartridge sends in a response.
_RESPONSE_TYPES = (
    FrameType.STREAM_START,
    FrameType.CHUNK,
    FrameType.STREAM_END,
    FrameType.LOG,
    FrameType.END,
    FrameType.ERR,
    FrameType.CREDIT,
)


def _response_frame(ft: FrameType, rid: MessageId) -> Frame:
    if ft is FrameType.CHUNK:
        return frames.chunk(rid, "s", 0, b"\x41a")
    if ft is FrameType.STREAM_START:
        return frames.stream_start(rid, "s", "media:")
    if ft is FrameType.STREAM_END:
        return frames.stream_end(rid, "s", 0)
    if ft is FrameType.END:
        return frames.end(rid)
    if ft is FrameType.ERR:
        return frames.err(rid, "HANDLER_ERROR", "failed")
    if ft is FrameType.CREDIT:
        return frames.credit(rid, 4, "request", stream_id="s")
    return frames.log(rid, "info", "a line")


def _disposal(res: AreaResult, rng: random.Random) -> None:
    """Requests open and end on one connection; each frame from the cartridge is a case."""
    conn, counters = ready_host()
    live: dict[MessageId, _Flow] = {}
    ended: list[MessageId] = []
    never = [MessageId.new() for _ in range(3)]
    for _ in range(60):
        roll = rng.random()
        if roll < 0.2 or not live:
            rid = MessageId.new()
            live[rid] = _Flow()
            conn.add_flow(rid, live[rid])
            continue
        if roll < 0.35:
            rid = rng.choice(list(live))
            del live[rid]
            conn.forget(rid)
            ended.append(rid)
            continue
        pools = [list(live), ended, never]
        rid = rng.choice(rng.choice([p for p in pools if p]))
        ft = rng.choice(_RESPONSE_TYPES)
        flow = live.get(rid)
        # A late CREDIT is counted apart from other late frames: a grant racing the terminal.
        before = (
            flow.frames if flow else 0,
            counters.stragglers + counters.late_credits,
            counters.no_route,
        )
        conn.receive_frame(_response_frame(ft, rid))
        after = (
            flow.frames if flow else 0,
            counters.stragglers + counters.late_credits,
            counters.no_route,
        )
        ours = {0: "route", 1: "straggler", 2: "no route"}.get(
            next((i for i in range(3) if after[i] != before[i]), -1), "nothing"
        )
        got = F.dispose(rid in live, rid in ended)
        theirs = {
            F.DispositionRoute: "route",
            F.DispositionStraggler: "straggler",
            F.DispositionNoRoute: "no route",
        }[type(got)]
        res.cases += 1
        res.check(f"dispose {ft.name} live={rid in live} ended={rid in ended}", ours, theirs)


def run_unrouted(n: int, rng: random.Random) -> AreaResult:
    res = AreaResult("unrouted frames")
    while res.cases < n:
        _disposal(res, rng)
    return res
