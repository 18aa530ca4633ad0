"""Dispatch by cap URN meaning, not by text (URN-18).

A host forwards the requester's cap text unchanged, and requesters write caps as they like:
in canonical form, with the tags in another order, with ``in``/``out`` spelled out, or less
specific than the cap that serves them. A cartridge that compares cap text with its manifest
serves only the one spelling it wrote, and answers every other with ``NO_HANDLER``. This
check sends, for identity and each simple manifest cap, the cap as written, its canonical
form, its tags reordered and a less specific request, and fails on ``NO_HANDLER``; any other
answer (an END, a handler's own ERR) means the request reached a handler.
"""

from __future__ import annotations

import time

import cbor2

from ..protocol import IDENTITY_CAP, ErrorCode, FrameType, MessageId
from ..protocol import frames as build
from ..urn import CapEffect, CapUrn, CapUrnError
from ._checks_requests import BASELINE_LIMITS, sample, sweep_caps
from ._context import CheckContext, Conn, meta_of
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped

__all__ = ("request_spellings",)

#: Manifest caps (besides identity) whose spellings are sent: enough to meet a cartridge's
#: own caps, few enough to keep the check short.
_MAX_CAPS = 4


def request_spellings(text: str) -> list[tuple[str, str]]:
    """``(how, text)`` of the spellings of the cap ``text`` a requester may send and a
    cartridge must serve: as written, canonical, tags reordered (with ``in`` and ``out``
    spelled out), and a less specific request; each parses, the first three are equivalent
    to ``text`` and the last is a request ``text`` is dispatchable for. Spellings equal to
    an earlier one are left out; an unparsable ``text`` has only itself."""
    out = [("as written", text)]
    try:
        cap = CapUrn.parse(text)
    except CapUrnError:
        return out
    canonical = str(cap)
    parts = _split_tags(canonical[len("cap:") :])
    keys = {part.split("=", 1)[0] for part in parts}
    spelled = [*parts]
    if "in" not in keys:
        spelled.append("in=media:")
    if "out" not in keys:
        spelled.append("out=media:")
    candidates = [("canonical", canonical), ("tags reordered", "cap:" + ";".join(spelled[::-1]))]
    general = _less_specific(cap)
    if general is not None:
        candidates.append(("less specific", general))
    seen = {text}
    for how, spelling in candidates:
        if spelling in seen or not _fits(cap, spelling, exact=how != "less specific"):
            continue
        seen.add(spelling)
        out.append((how, spelling))
    return out


def _split_tags(body: str) -> list[str]:
    """The ``;``-separated tags of a cap URN's body, quotes respected."""
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in body:
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == ";" and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if current:
        parts.append("".join(current))
    return [p for p in parts if p]


def _less_specific(cap: CapUrn) -> str | None:
    """A request ``cap`` serves that says less: without its y tags, else with any output,
    else with any effect (``None`` when none of these is a cap URN)."""
    general = cap
    try:
        for key in list(cap.tags):
            general = general.without_tag(key)
    except CapUrnError:  # nothing but its tags: without them it would be the bare top
        general = cap
    if general.specificity < cap.specificity:
        return str(general)
    for widen in (_any_output, _any_effect):
        try:
            wider = widen(cap)
        except CapUrnError:
            continue
        if wider != cap:
            return str(wider)
    return None


def _any_output(cap: CapUrn) -> CapUrn:
    return cap.with_out_spec("media:")


def _any_effect(cap: CapUrn) -> CapUrn:
    return cap.with_effect(CapEffect.ANY)


def _fits(cap: CapUrn, spelling: str, *, exact: bool) -> bool:
    """Whether ``spelling`` parses and still names ``cap`` (``exact``) or a request ``cap``
    serves."""
    try:
        request = CapUrn.parse(spelling)
    except (CapUrnError, ValueError):
        return False
    return request.is_equivalent(cap) if exact else cap.is_dispatchable(request)


@check(
    "URN-18",
    "Requests dispatched by cap meaning, not by text",
    rules=("URN-18", "URN-15", "URN-17"),
    ck="CK-44",
)
def dispatch_by_meaning(ctx: CheckContext) -> str:
    conn = ctx.shared(BASELINE_LIMITS)
    hello = ctx.run.hello or conn.hello
    manifest = meta_of(hello).get("manifest") if hello is not None else None
    caps = [(IDENTITY_CAP, "media:"), *sweep_caps(manifest)[:_MAX_CAPS]]
    refused: list[str] = []
    unserved: list[str] = []
    sent = 0
    for urn, media in caps:
        for how, spelling in request_spellings(urn):
            if ctx.remaining() < 2.0:
                break
            answer = _send(ctx, conn, spelling, media)
            if answer is None:  # no answer in time: not a dispatch verdict
                continue
            sent += 1
            if answer == ErrorCode.NO_HANDLER:
                if how == "as written":  # a cap it lists but does not serve at all:
                    unserved.append(urn)  # another rule's failure (HSK-8, the sweep)
                    break
                refused.append(f"{spelling!r} ({how} for {urn!r})")
    if refused:
        more = f" (+{len(refused) - 1} more)" if len(refused) > 1 else ""
        raise CheckFailed(
            f"NO_HANDLER for {refused[0]}{more}: a cartridge receives the requester's cap "
            "text and picks its handler by chapter 7 (URN-18), not by comparing text"
        )
    if not sent or len(unserved) == len(caps):
        raise CheckSkipped("no cap was served as written, so no other spelling can be judged")
    note = f"; not served even as written: {', '.join(unserved)}" if unserved else ""
    return f"{sent} spellings of {len(caps) - len(unserved)} caps reached a handler{note}"


def _send(ctx: CheckContext, conn: Conn, spelling: str, media: str) -> str | None:
    """Send one request for ``spelling`` with a sample input; the ERR code it got (``""``
    for an END), ``None`` when no answer came in time (the request is then cancelled)."""
    rid = MessageId.new()
    try:
        ex = conn.exchange(
            spelling,
            [cbor2.dumps(sample(media))],
            rid=rid,
            media=media,
            deadline=min(ctx.deadline - 1.0, time.monotonic() + 3.0),
            cancel_on_peer_call=True,
        )
    except CheckFailed:
        conn.send(build.cancel(rid))
        conn.session.drain(0.3)
        return None
    t = ex.terminal
    if t is None:
        return None
    if t.frame_type is FrameType.ERR:
        return str(meta_of(t).get("code", ""))
    return ""
