"""Our decisions against the reference's formal model (``capdag._formal``), a sample per area.

The model is capdag 1.524.58's protocol written in Lean and proved; ``benchmarks/oracle_diff.py``
runs the full set (100,000 cases and more per area). Here each area runs a small sample from
a fixed seed, then a few hypothesis-drawn seeds, and every case must agree.
"""

from __future__ import annotations

import random

import pytest
from _oracle_common import AreaResult, Runner
from _oracle_flow import run_credit, run_requests, run_unrouted
from _oracle_pools import run as run_pools
from _oracle_urn import EFFECTS, FORMS, Coords, compare_pair, compare_select
from _oracle_urn import run as run_dispatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

AREAS: dict[str, tuple[Runner, int]] = {
    # area: (runner, sample size: a second or two each)
    "dispatch": (run_dispatch, 600),
    "credit": (run_credit, 2500),
    "pools": (run_pools, 800),
    "requests": (run_requests, 2500),
    "unrouted": (run_unrouted, 2500),
}


def _agrees(res: AreaResult, n: int) -> None:
    assert res.cases >= n
    assert res.disagreement_count == 0, "\n".join(res.disagreements)


@pytest.mark.parametrize("area", sorted(AREAS))
def test_a_sample_of_each_area_agrees_with_the_model(area: str) -> None:
    runner, n = AREAS[area]
    _agrees(runner(n, random.Random(f"sample:{area}")), n)


@pytest.mark.parametrize("area", sorted(AREAS))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**64))
def test_runs_from_drawn_seeds_agree_with_the_model(area: str, seed: int) -> None:
    runner, n = AREAS[area]
    _agrees(runner(n // 10, random.Random(seed)), n // 10)


def _tags(keys: str) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    return st.tuples(*(st.sampled_from(FORMS) for _ in keys)).map(
        lambda forms: tuple((k, f) for k, f in zip(keys, forms, strict=True) if f is not None)
    )


_caps = st.tuples(_tags("ab"), _tags("ab"), _tags("xy"), st.sampled_from(EFFECTS))


@settings(max_examples=300, deadline=None)
@given(cand=_caps, req=_caps)
def test_drawn_cap_pairs_agree_with_the_model(cand: Coords, req: Coords) -> None:
    res = AreaResult("dispatch/ranking")
    compare_pair(res, cand, req)
    assert res.disagreement_count == 0, "\n".join(res.disagreements)


@settings(max_examples=100, deadline=None)
@given(cands=st.lists(_caps, min_size=1, max_size=4), req=_caps)
def test_drawn_handler_tables_agree_with_the_model(cands: list[Coords], req: Coords) -> None:
    res = AreaResult("dispatch/ranking")
    compare_select(res, cands, req)
    assert res.disagreement_count == 0, "\n".join(res.disagreements)
