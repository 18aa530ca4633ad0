"""What the cartridge runtime asks of URNs: handler lookup, input-stream
matching and output typing (URN-18 to URN-20, REQ-23).

Theory of operation (handler lookup, URN-18): the runtime keeps its handlers in
a table keyed by the *registration text*. A request whose text is byte for
byte a key gets that handler at once — no parsing, no ranking. Otherwise the
request is parsed, every registered cap that *serves* it
(:meth:`CapUrn.is_dispatchable`) is a candidate, and the candidate with the
smallest :func:`ranking_key` wins — exact specificity first, then the least
refinement, then the least fallback — the first registered winning ties.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from ._cap import CapEffect, CapUrn, parse_cap_or_none
from ._errors import CapUrnError
from ._media import MediaUrn, from_stored_tags, parse_media_or_none

__all__ = (
    "IDENTITY_CAP",
    "DISCARD_CAP",
    "ADAPTER_SELECTION_CAP",
    "STANDARD_CAPS",
    "ranking_key",
    "select_handler",
    "media_matches_for_stream",
    "find_stream_index",
    "infer_output_media",
    "main_output_media",
    "is_conformant_output",
)

#: Identity: passes its input through unchanged. Registered first by every runtime.
IDENTITY_CAP: Final = "cap:effect=none"
#: Discard: takes anything, gives nothing. Registered second.
DISCARD_CAP: Final = "cap:out=media:void"
#: Adapter selection. Registered third.
ADAPTER_SELECTION_CAP: Final = 'cap:in="media:";out="media:adapter-selection;fmt=json;record"'
#: The handlers every runtime registers, in order, before the user's (they win ties).
STANDARD_CAPS: Final = (IDENTITY_CAP, DISCARD_CAP, ADAPTER_SELECTION_CAP)


def ranking_key(candidate: CapUrn, request: CapUrn) -> tuple[int, int]:
    """``(tier, distance)``: tier 0 when the candidate is at least as specific
    as the request (exact or refinement), 1 for a fallback; distance is the
    absolute specificity difference. Smaller is better."""
    d = candidate.specificity - request.specificity
    return (0, d) if d >= 0 else (1, -d)


def _key_text(entry: str | CapUrn) -> str:
    return entry if isinstance(entry, str) else entry.text


def _as_cap(entry: str | CapUrn) -> CapUrn | None:
    return parse_cap_or_none(entry) if isinstance(entry, str) else entry


def select_handler(registered: Sequence[str | CapUrn], request: str | CapUrn) -> int | None:
    """Index in ``registered`` of the handler the runtime picks for ``request``,
    or None (the runtime then answers ``NO_HANDLER``).

    ``registered`` lists the handler table in registration order; a
    :class:`CapUrn` entry is keyed by its canonical text, as is a
    :class:`CapUrn` request. Like the runtime's table (a dict), registering the
    same text again replaces the handler but keeps the first position, so the
    returned index is then the *last* occurrence of that text.

    1. ``request`` equal to a registration text → that handler, unparsed.
    2. ``request`` that does not parse → None.
    3. Else: among entries that parse and serve the request
       (``entry.is_dispatchable(request)``), the smallest :func:`ranking_key`;
       ties go to the earliest position.

    Never raises on bad input: an unparseable request or entry simply does not match.
    """
    slot_of: dict[str, int] = {}  # key text -> index of its handler (last registration)
    order: list[str] = []  # key texts in first-registration order
    for i, entry in enumerate(registered):
        key = _key_text(entry)
        if key not in slot_of:
            order.append(key)
        slot_of[key] = i

    request_text = _key_text(request)
    hit = slot_of.get(request_text)
    if hit is not None:
        return hit
    req = _as_cap(request)
    if req is None:
        return None

    best: int | None = None
    best_key: tuple[int, int] | None = None
    for key in order:
        i = slot_of[key]
        cand = _as_cap(registered[i])
        if cand is None or not cand.is_dispatchable(req):
            continue
        k = ranking_key(cand, req)
        if best_key is None or k < best_key:
            best, best_key = i, k
    return best


def media_matches_for_stream(wanted: str | MediaUrn, arrived: str | MediaUrn) -> bool:
    """Whether an incoming stream labelled ``arrived`` answers a lookup for
    ``wanted`` (``find_stream`` / ``require_stream`` and pairing a stream with
    its declared arg, URN-20).

    The test is *equivalence*, not subsumption: ``media:ext=pdf;document`` does
    not answer ``media:document``, but ``media:a;?b`` answers ``media:a``. A side
    that is not a media URN never matches.
    """
    w = parse_media_or_none(wanted) if isinstance(wanted, str) else wanted
    a = parse_media_or_none(arrived) if isinstance(arrived, str) else arrived
    return w is not None and a is not None and w.is_equivalent(a)


def find_stream_index(arrived: Iterable[str | MediaUrn], wanted: str | MediaUrn) -> int | None:
    """Index of the first stream URN in ``arrived`` equivalent to ``wanted``
    (unparseable stream URNs skipped), or None (also when ``wanted`` does not
    parse). The runtime's ``require_stream`` turns None into its error."""
    w = parse_media_or_none(wanted) if isinstance(wanted, str) else wanted
    if w is None:
        return None
    for i, urn in enumerate(arrived):
        if media_matches_for_stream(w, urn):
            return i
    return None


def infer_output_media(cap: CapUrn, runtime_input: MediaUrn) -> MediaUrn:
    """The media URN of what ``cap`` emits for an input typed ``runtime_input`` (REQ-23).

    ``declared`` → the declared out; ``none`` → the input itself; ``patch`` →
    the input with the in→out tag edits applied (keys whose stored value differs
    between in and out are removed, then out's differing values added).

    :raises CapUrnError: the input does not satisfy the declared in (closed
        reading), the effect is the request form ``?``, or the result does not
        satisfy the declared out.
    """
    declared_in, declared_out = cap.in_spec, cap.out_spec
    if not runtime_input.satisfies(declared_in):
        raise CapUrnError(
            f"runtime input {runtime_input.text!r} does not conform to declared input "
            f"{declared_in.text!r}",
            reason="runtime_input_mismatch",
        )
    if cap.effect is CapEffect.DECLARED:
        out = declared_out
    elif cap.effect is CapEffect.NONE:
        out = runtime_input
    elif cap.effect is CapEffect.PATCH:
        tags = dict(runtime_input.tags)
        din, dout = declared_in.tags, declared_out.tags
        for key in din.keys() | dout.keys():
            before, after = din.get(key), dout.get(key)
            if before == after:
                continue
            if before is not None:
                tags.pop(key, None)
            if after is not None:
                tags[key] = after
        out = from_stored_tags(tags)
    else:
        raise CapUrnError(
            "cannot infer the output of an unconstrained effect request (?effect)",
            reason="unsupported_effect",
        )
    if not out.satisfies(declared_out):
        raise CapUrnError(
            f"inferred output {out.text!r} does not conform to declared output "
            f"{declared_out.text!r}",
            reason="runtime_output_mismatch",
        )
    return out


def main_output_media(cap: CapUrn) -> MediaUrn:
    """The media URN a response's main output stream carries: the cap's effect
    applied to its *declared* input (``declared`` → out, ``none`` → in,
    ``patch`` → in with the edits applied). Computed once per registered cap.

    :raises CapUrnError: for a ``?effect`` cap (a request form, not a handler),
        or a declaration whose effect cannot be applied to its own input.
    """
    return infer_output_media(cap, cap.in_spec)


def is_conformant_output(cap: CapUrn, runtime_input: MediaUrn, emitted: MediaUrn) -> bool:
    """Whether an emitted output type keeps the cap's effect promise: for
    ``none``/``patch`` it must be equivalent to the inference, for ``declared``
    it must satisfy it.

    :raises CapUrnError: when the inference itself is impossible (see
        :func:`infer_output_media`).
    """
    inferred = infer_output_media(cap, runtime_input)
    if cap.effect is CapEffect.DECLARED:
        return emitted.satisfies(inferred)
    return emitted.is_equivalent(inferred)
