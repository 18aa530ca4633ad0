"""Dispatch and ranking against the formal model: cap relations, specificity, selection.

A cap is generated as its coordinates (in and out media tags, y tags, effect), then written
both ways: as cap URN text for our parser and as the model's ``WfCap``. Per pair of caps
(candidate, request) the runner compares ``is_dispatchable``/``dispatch``,
``may_dispatch``, ``accepts``, ``is_equivalent``, ``is_comparable``, ``flows_into``/``flows``,
``specificity``, ``ranking_key``, the effect rule (``effect_ok``) and the query readings of
a request and a pattern (``query_admits``, ``query_may_admit`` of ``query_of_request`` and
``query_of_pattern``); per list of candidates, ``select_handler`` against ``select``.
Caps our parser refuses (``effect=none`` whose input does not conform to its output, the
bare top) are not cases: the model's ``WfCap`` has no admissibility rule.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import capdag._formal as F
from _oracle_common import AreaResult

from cartridge_runtime.urn import CapUrn, CapUrnError, ranking_key, select_handler

#: Per-key forms: the stored value of a key (URN-6), ``None`` for a missing key.
FORMS: tuple[str | None, ...] = (None, "?", "?=v", "?=w", "*", "!=v", "!=w", "=v", "=w", "!")
#: The small domain walked exhaustively: one media key, one y key, four forms each.
SMALL_FORMS: tuple[str | None, ...] = (None, "*", "=v", "!")
EFFECTS = ("?", "declared", "none", "patch")

#: (in tags, out tags, y tags, effect); tags are sorted (key, form) pairs.
Coords = tuple[
    tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], str
]


def _tag_text(key: str, form: str) -> str:
    if form == "?":
        return f"?{key}"
    if form == "*":
        return key
    if form == "!":
        return f"!{key}"
    if form.startswith("?=") or form.startswith("!="):
        return f"{key}{form}"
    return f"{key}{form}"  # "=v"


def _constraint(form: str) -> Any:
    if form == "?":
        return F.ConstraintUnconstrained()
    if form == "*":
        return F.ConstraintPresent()
    if form == "!":
        return F.ConstraintAbsent()
    if form.startswith("?="):
        return F.ConstraintOptionalNot(form[2:])
    if form.startswith("!="):
        return F.ConstraintPresentNot(form[2:])
    return F.ConstraintExact(form[1:])


def _tags(keys: Sequence[str], forms: Sequence[str | None]) -> tuple[tuple[str, str], ...]:
    return tuple((k, f) for k, f in zip(keys, forms, strict=True) if f is not None)


def cap_text(coords: Coords) -> str:
    """The cap URN text of ``coords`` (in and out always quoted and written out)."""
    ins, outs, ys, effect = coords
    parts = [
        'in="media:' + ";".join(_tag_text(k, f) for k, f in ins) + '"',
        'out="media:' + ";".join(_tag_text(k, f) for k, f in outs) + '"',
        *(_tag_text(k, f) for k, f in ys),
    ]
    parts.append("?effect" if effect == "?" else f"effect={effect}")
    return "cap:" + ";".join(parts)


@cache
def _wf(scheme: str, tags: tuple[tuple[str, str], ...]) -> Any:
    made = F.make(scheme, [(k, _constraint(f)) for k, f in sorted(tags)])
    assert made is not None, (scheme, tags)
    return made


_EFFECT_MODEL = {
    "?": F.EffectUnspecified(),
    "declared": F.EffectDeclared(),
    "none": F.EffectNone_(),
    "patch": F.EffectPatch(),
}


@cache
def model_cap(coords: Coords) -> Any:
    """The model's ``WfCap`` of ``coords``."""
    ins, outs, ys, effect = coords
    return F.WfCap(_wf("media", ins), _wf("media", outs), _wf("cap", ys), _EFFECT_MODEL[effect])


@cache
def our_cap(coords: Coords) -> CapUrn | None:
    """Our parse of ``coords``' text, ``None`` when we refuse it (not admissible)."""
    try:
        return CapUrn.parse(cap_text(coords))
    except CapUrnError:
        return None


@cache
def _model_spec(coords: Coords) -> int:
    return int(F.specificity(model_cap(coords)))


def small_domain() -> list[Coords]:
    """Every cap over one media key ``a``, one y key ``x`` and :data:`SMALL_FORMS`."""
    out: list[Coords] = []
    for fi, fo, fy, effect in itertools.product(SMALL_FORMS, SMALL_FORMS, SMALL_FORMS, EFFECTS):
        out.append((_tags("a", [fi]), _tags("a", [fo]), _tags("x", [fy]), effect))
    return out


def random_cap(rng: random.Random) -> Coords:
    """A cap over media keys ``a``, ``b`` and y keys ``x``, ``y``, every form possible."""

    def tags(keys: str) -> tuple[tuple[str, str], ...]:
        return _tags(keys, [rng.choice(FORMS) for _ in keys])

    return (tags("ab"), tags("ab"), tags("xy"), rng.choice(EFFECTS))


def compare_pair(res: AreaResult, cand: Coords, req: Coords) -> bool:
    """Compare every relation of one (candidate, request) pair; ``False`` when we refuse
    one of the caps (not a case)."""
    c, r = our_cap(cand), our_cap(req)
    if c is None or r is None:
        return False
    mc, mr = model_cap(cand), model_cap(req)
    name = f"{c} / {r}"
    res.cases += 1
    res.check(f"specificity {c}", c.specificity, _model_spec(cand))
    served = c.is_dispatchable(r)
    res.check(f"dispatch {name}", served, F.dispatch(mc, mr))
    res.check(f"may_dispatch {name}", c.may_dispatch(r), F.may_dispatch(mc, mr))
    res.check(f"accepts {name}", c.accepts(r), F.accepts(mc, mr))
    res.check(f"equivalent {name}", c.is_equivalent(r), F.equivalent(mc, mr))
    res.check(f"comparable {name}", c.is_comparable(r), F.comparable(mc, mr))
    res.check(f"flows {name}", c.flows_into(r), F.flows(mc, mr))
    res.check(f"ranking_key {name}", ranking_key(c, r), tuple(F.ranking_key(mc, mr)))
    res.check(
        f"effect_ok {name}",
        r.effect.value in ("?", c.effect.value),
        F.effect_ok(mc.effect, mr.effect),
    )
    # The query readings: a request served, a pattern fitted, the same answers.
    res.check(f"query_of_request {name}", served, F.query_admits(F.query_of_request(mr), mc))
    res.check(
        f"query_may_admit {name}",
        c.may_dispatch(r),
        F.query_may_admit(F.query_of_request(mr), mc),
    )
    res.check(f"query_of_pattern {name}", r.accepts(c), F.query_admits(F.query_of_pattern(mr), mc))
    return True


def compare_select(res: AreaResult, cands: Sequence[Coords], req: Coords) -> bool:
    """Our handler choice against the model's ``select`` over the same registrations.

    The request's text never equals a registration here: the runtime answers such a
    request by its text before any ranking, which the model does not describe (the spec
    names that case, ``DSP-SHORTCUT``)."""
    ours = [our_cap(x) for x in cands]
    r = our_cap(req)
    if r is None or any(x is None for x in ours):
        return False
    texts = [str(x) for x in ours]
    if str(r) in texts or len(set(texts)) != len(texts):
        return False
    res.cases += 1
    index = select_handler(texts, r)
    picked = F.select([model_cap(x) for x in cands], model_cap(req))
    name = f"select {texts} for {r}"
    if picked is None or index is None:
        res.check(name, index, None if picked is None else "a candidate")
        return True
    # The model's answer is a value: it names our pick when it is that very candidate.
    mine = model_cap(cands[index])
    same = F.equivalent(picked, mine) and tuple(F.ranking_key(picked, model_cap(req))) == tuple(
        F.ranking_key(mine, model_cap(req))
    )
    first = next(
        i
        for i, x in enumerate(cands)
        if F.equivalent(model_cap(x), picked)
        and F.specificity(model_cap(x)) == F.specificity(picked)
    )
    res.check(name, (same, index), (True, first))
    return True


def run(n: int, rng: random.Random) -> AreaResult:
    """At least ``n`` dispatch cases: the small domain's pairs (all of them when ``n`` is
    large enough, else a sample), random pairs, and one select case in ten."""
    res = AreaResult("dispatch/ranking")
    small = small_domain()
    pairs: Iterable[tuple[Coords, Coords]]
    if n >= len(small) ** 2:
        pairs = itertools.product(small, small)
    else:
        pairs = ((rng.choice(small), rng.choice(small)) for _ in range(n // 2))
    for cand, req in pairs:
        compare_pair(res, cand, req)
    while res.cases < n:
        if rng.random() < 0.1:
            k = rng.randint(1, 4)
            compare_select(res, [random_cap(rng) for _ in range(k)], random_cap(rng))
        else:
            compare_pair(res, random_cap(rng), random_cap(rng))
    return res
