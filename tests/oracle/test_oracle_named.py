"""The named cases of chapter 16: where the formal model and the running reference part, and
proof that the differential runs can fail."""

from __future__ import annotations

import random
from types import SimpleNamespace

import capdag._formal as F
import pytest
import tagged_urn._formal as T
from _oracle_common import AreaResult
from _oracle_pools import run as run_pools
from _oracle_urn import compare_pair
from capdag.bifaci.cartridge_runtime import CartridgeRuntime as ReferenceRuntime

from cartridge_runtime.protocol import POOL_ALL, PoolAdmission
from cartridge_runtime.urn import CapUrn, select_handler


def test_urn_21_a_request_equal_to_a_registration_goes_to_it_not_to_the_models_first() -> None:
    # Two equivalent registrations: the first names media key `a` as unconstrained.
    first, second = 'cap:in="media:?a";x', "cap:x"
    registered = [str(CapUrn.parse(first)), str(CapUrn.parse(second))]
    request = registered[1]
    assert CapUrn.parse(registered[0]).is_equivalent(CapUrn.parse(request))

    # The reference's running code answers by the text (its handler table is a dict).
    table = SimpleNamespace(handlers={registered[0]: "first", registered[1]: "second"})
    assert ReferenceRuntime.find_handler(table, request) == "second"  # type: ignore[arg-type]
    # ... and so do we.
    assert select_handler(registered, request) == 1

    # The model ranks both as (0, 0) and keeps the first. The two differ only in how they
    # read a missing `a` when it must be complete: as absent (the second) or unconstrained.
    top, ys = F.make("media", []), F.make("cap", [("x", F.ConstraintPresent())])
    with_a = F.make("media", [("a", F.ConstraintUnconstrained())])
    one = F.WfCap(with_a, top, ys, F.EffectDeclared())
    two = F.WfCap(top, top, ys, F.EffectDeclared())
    picked = F.select([one, two], two)
    absent_a = F.make("media", [("a", F.ConstraintAbsent())])
    assert picked is not None
    assert not T.refines_closed(picked.input, absent_a)  # the first: `?a` stays open
    assert T.refines_closed(two.input, absent_a)


def test_hst_23_the_gates_open_table_admits_a_cap_the_model_does_not_know() -> None:
    gate: PoolAdmission[int] = PoolAdmission()
    gate.add_pool("shared", 1, ("cap:x",))
    gate.add_pool(POOL_ALL, 0)
    assert [p.name for p in gate.chain_pools("cap:x")] == ["shared", POOL_ALL]
    assert gate.arrive("cap:x", 0) is None  # admitted through the shared pool and all

    state = F.set_capacity(F.set_capacity(F.empty(), "shared", 1), POOL_ALL, 0)
    chain = F.chain("cap:x", [("shared", ["cap:x"])])
    assert chain == ["cap:x", "shared", POOL_ALL]
    assert F.state_arrive(state, chain) == F.PoolsArrivalUnknownPool("cap:x")

    # A closed table (a cartridge's own) refuses it, as the model does.
    own: PoolAdmission[int] = PoolAdmission(closed=True)
    own.add_pool("shared", 1, ("cap:x",))
    with pytest.raises(LookupError):
        own.arrive("cap:x", 0)


def test_a_wrong_relation_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CapUrn, "is_dispatchable", lambda self, request: True)
    res = AreaResult("dispatch/ranking")
    cand = ((("a", "=v"),), (), (("x", "*"),), "declared")
    req = ((("a", "=w"),), (), (("x", "*"),), "declared")
    assert compare_pair(res, cand, req)
    assert res.disagreement_count >= 1
    assert any(line.startswith("dispatch ") for line in res.disagreements)


def test_a_wrong_admission_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # A table that never lets a waiting request in once a slot frees.
    monkeypatch.setattr(PoolAdmission, "admit_next", lambda self: None)
    res = run_pools(600, random.Random(1))
    assert res.disagreement_count > 0
    assert any(line.startswith("admit_next") for line in res.disagreements)


#: The model's functions the differential runs ask (``capdag._formal`` names them in Lean).
ASKED = (
    "CapDAG.Exec.dispatch",
    "CapDAG.Exec.mayDispatch",
    "CapDAG.Exec.accepts",
    "CapDAG.Exec.equivalent",
    "CapDAG.Exec.comparable",
    "CapDAG.Exec.flows",
    "CapDAG.Exec.specificity",
    "CapDAG.Exec.rankingKey",
    "CapDAG.Exec.effectOk",
    "CapDAG.Exec.select",
    "CapDAG.Exec.queryAdmits",
    "CapDAG.Exec.queryMayAdmit",
    "CapDAG.Bifaci.Credit.Window.arrive",
    "CapDAG.Bifaci.Credit.Window.consume",
    "CapDAG.Bifaci.Credit.Window.flush",
    "CapDAG.Bifaci.Credit.Gate.acquire",
    "CapDAG.Bifaci.Credit.negotiate",
    "CapDAG.Bifaci.Credit.grantTarget",
    "CapDAG.Bifaci.Pools.State.arrive",
    "CapDAG.Bifaci.Pools.State.admitNext",
    "CapDAG.Bifaci.Pools.State.release",
    "CapDAG.Bifaci.Pools.effective",
    "CapDAG.Bifaci.Request.check",
    "CapDAG.Bifaci.Request.write",
    "CapDAG.Bifaci.Request.dispose",
    "CapDAG.Bifaci.Request.terminalOf",
)


def test_what_the_runs_ask_the_model_rests_on_proved_claims() -> None:
    exports = {e.name: e for e in F.ASSURANCE.exports}
    claims = {c.name: c for c in F.ASSURANCE.claims}
    for name in ASKED:
        export = exports[name]
        assert not export.trust.depends_on_sorry, name
        assert export.claims, f"{name} has no claim"
        for claim in export.claims:
            assert claims[claim].status == "proved", (name, claim)
            assert not claims[claim].evidence_trust.depends_on_sorry, (name, claim)
