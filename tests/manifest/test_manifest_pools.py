"""Pools JSON (HELLO and heartbeat replies) and pool-chain admission.

The vectors fix the bytes; a hypothesis differential test drives our
``PoolTable`` and the reference's ``RuntimePools`` with the same operations
and compares every answer and every snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from manifest_vectors import (
    AUTO_REGISTERED,
    FRAMES,
    ORPHAN,
    cartridge_hellos,
    frames,
    heartbeat_replies,
    hello_files,
    vector_manifest_bytes,
    wire_map,
)

from cartridge_runtime.manifest import (
    CAP_IDENTITY,
    Manifest,
    PoolDeclarationError,
    PoolDeclarations,
    PoolState,
    PoolTable,
    UnknownPoolError,
    effective_capacity,
    initial_pools_json,
    parse_desired_capacities,
    parse_pools_json,
)

SLOW = "cap:peer-slow"


def registered(manifest: Manifest) -> list[str]:
    """The vector cartridge's handler URNs, in declaration order (not sorted)."""
    return [cap.urn for cap in manifest.all_caps() if cap.urn != ORPHAN] + list(AUTO_REGISTERED)


def vector_table() -> PoolTable[str]:
    manifest = Manifest.from_json(vector_manifest_bytes())
    return PoolTable.from_manifest(registered(manifest), manifest)


@pytest.mark.parametrize("path", hello_files(), ids=lambda path: path.name)
def test_hello_pools_bytes(path: Path) -> None:
    for meta in cartridge_hellos(path):
        manifest = Manifest.from_json(meta["manifest"])
        assert initial_pools_json(registered(manifest), manifest) == meta["pools"]
        assert vector_table().to_json_bytes() == meta["pools"]


def test_hello_pools_parse() -> None:
    meta = cartridge_hellos(FRAMES / "01-handshake-identity-policy.jsonl")[0]
    states = parse_pools_json(meta["pools"])
    assert states[SLOW] == PoolState(declared=1, configured=1)
    assert states["all"].caps[0] == CAP_IDENTITY
    assert list(states)[-1] == "all"
    assert json.dumps({n: s.to_json() for n, s in states.items()}).encode() == meta["pools"]


def _host_heartbeat_desired(path: Path) -> list[bytes | None]:
    return [
        wire_map(record).get(5, {}).get("desired_capacities")
        for record in frames(path)
        if record["dir"] == "host->cartridge" and record["type"] == "HEARTBEAT"
    ]


def test_heartbeat_vector_09() -> None:
    path = FRAMES / "09-heartbeat.jsonl"
    replies = heartbeat_replies(path)
    desired = _host_heartbeat_desired(path)
    assert desired[0] is None and desired[1] is None
    table = vector_table()
    assert table.to_json_bytes() == replies[0] == replies[1]
    assert desired[2] is not None
    table.apply_desired_json(desired[2])
    assert table.to_json_bytes() == replies[2]
    assert desired[3] is not None
    with pytest.raises(UnknownPoolError) as info:
        table.apply_desired_json(desired[3])
    # The reference's ERR message is "desired capacities refused: " + this text.
    assert str(info.value) == "unknown pool 'no-such-pool'"
    assert info.value.code == "UNKNOWN_POOL"
    assert table.to_json_bytes() == replies[2]  # nothing applied
    assert table.arrive(SLOW, "rid-1") is None
    assert table.to_json_bytes() == replies[3]


def test_pool_queue_vector_20() -> None:
    (reply,) = heartbeat_replies(FRAMES / "20-pool-queue.jsonl")
    table = vector_table()
    assert table.arrive(SLOW, "a") is None
    assert table.arrive(SLOW, "b") == 1  # "Request queued (position 1 on pool 'cap:peer-slow')"
    assert table.arrive(SLOW, "c") == 2
    assert table.admit_next() is None
    assert table.remove_queued(lambda item: item == "c") == "c"
    assert table.remove_queued(lambda item: item == "c") is None
    assert table.to_json_bytes() == reply
    table.release(SLOW)
    assert table.admit_next() == (SLOW, "b")
    assert table.admit_next() is None
    table.release(SLOW)
    with pytest.raises(RuntimeError):
        table.release(SLOW)


def test_desired_set_available_and_effective() -> None:
    table = vector_table()
    table.apply_desired({"all": 3, SLOW: 0})
    assert table.effective("all") == 3 and table.effective(SLOW) == 0
    table.set_available("all", 2)
    assert table.effective("all") == 2
    state = table.snapshot()["all"]
    assert state.available == 2 and state.to_json()["available"] == 2
    assert list(state.to_json()) == [
        "declared",
        "configured",
        "active",
        "queued",
        "available",
        "caps",
    ]
    with pytest.raises(UnknownPoolError):
        table.set_available("nope", 1)
    with pytest.raises(UnknownPoolError):
        table.arrive("cap:nope", "x")
    for bad in (b"[1]", b"{", b'{"all": -1}', b'{"all": "1"}', b"\xff"):
        with pytest.raises(UnknownPoolError):
            parse_desired_capacities(bad)


@pytest.mark.parametrize(
    ("configured", "available", "effective"),
    [
        (0, None, 0),
        (3, None, 3),
        (0, 2, 2),
        (3, 2, 2),
        (3, 0, 3),
        (2, 5, 2),
        (0, 0, 0),
    ],
)
def test_effective_capacity(configured: int, available: int | None, effective: int) -> None:
    assert effective_capacity(configured, available) == effective


def test_shared_pool_chain_and_json_order() -> None:
    caps = ["cap:b", "cap:a", CAP_IDENTITY]
    declarations = PoolDeclarations(
        pools={"gpu": ["cap:a", "cap:b"], "cpu": ["cap:a"]}, capacities={"gpu": 1}
    )
    table: PoolTable[int] = PoolTable(caps, declarations)
    assert table.names == ["cap:a", "cap:b", CAP_IDENTITY, "cpu", "gpu", "all"]
    assert table.chain("cap:a") == ["cap:a", "cpu", "gpu", "all"]
    assert table.arrive("cap:a", 1) is None
    assert table.arrive("cap:b", 2) == 1
    assert table.arrive(CAP_IDENTITY, 3) is None  # not behind gpu
    snap = table.snapshot()
    assert (snap["gpu"].active, snap["gpu"].queued) == (1, 1)
    assert (snap["cap:b"].queued, snap["all"].queued) == (1, 0)
    data = json.loads(table.to_json_bytes())
    assert data["gpu"]["caps"] == ["cap:a", "cap:b"]
    assert "caps" not in data["cap:a"]


@pytest.mark.parametrize(
    ("caps", "declarations"),
    [
        (["cap:a", "cap:a"], PoolDeclarations()),
        (["cap:in=?;x"], PoolDeclarations()),
        (["cap:a"], PoolDeclarations(pools={"p": ["cap:b"]})),
        (["cap:a"], PoolDeclarations(capacities={"q": 1})),
    ],
)
def test_table_refuses_bad_registrations(caps: list[str], declarations: PoolDeclarations) -> None:
    with pytest.raises(PoolDeclarationError):
        PoolTable(caps, declarations)


# -- differential against the reference's RuntimePools --------------------------------

_CAPS = ["cap:a", "cap:b", "cap:c"]
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.sampled_from(_CAPS)),
        st.tuples(st.just("release"), st.sampled_from(_CAPS)),
        st.tuples(st.just("admit"), st.just("")),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
        st.tuples(st.just("desired"), st.sampled_from([*_CAPS, "g", "all"]), st.integers(0, 2)),
        st.tuples(st.just("available"), st.sampled_from([*_CAPS, "g", "all"]), st.integers(0, 2)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=_OPS,
    members=st.lists(st.sampled_from(_CAPS), min_size=1, max_size=3, unique=True),
    caps=st.dictionaries(st.sampled_from([*_CAPS, "g", "all"]), st.integers(0, 2), max_size=3),
)
def test_admission_agrees_with_reference(
    ops: list[tuple[Any, ...]], members: list[str], caps: dict[str, int]
) -> None:
    runtime = pytest.importorskip("capdag.bifaci.cartridge_runtime")
    pools = pytest.importorskip("capdag.bifaci.pools")
    theirs = runtime.RuntimePools(
        list(_CAPS), pools.PoolDeclarations(pools={"g": list(members)}, capacities=dict(caps))
    )
    ours: PoolTable[int] = PoolTable(_CAPS, PoolDeclarations(pools={"g": members}, capacities=caps))
    active: dict[str, int] = dict.fromkeys(_CAPS, 0)
    ticket = 0
    for op in ops:
        kind = op[0]
        if kind == "arrive":
            ticket += 1
            got, want = ours.arrive(op[1], ticket), theirs.arrive(op[1], ticket)
            assert got == want
            if got is None:
                active[op[1]] += 1
        elif kind == "release":
            if active[op[1]] == 0:
                continue
            active[op[1]] -= 1
            ours.release(op[1])
            theirs.release(op[1])
        elif kind == "admit":
            got, want = ours.admit_next(), theirs.admit_next()
            assert got == want
            if got is not None:
                active[got[0]] += 1
        elif kind == "cancel":
            target = op[1]
            assert ours.remove_queued(lambda t, x=target: t == x) == theirs.remove_queued(
                lambda t, x=target: t == x
            )
        elif kind == "desired":
            ours.apply_desired({op[1]: op[2]})
            theirs.apply_desired({op[1]: op[2]})
        else:
            ours.set_available(op[1], op[2])
            theirs.set_available(op[1], op[2])
        expected = pools.encode_pool_states(theirs.snapshot())
        assert ours.to_json_bytes() == expected


def test_arrival_never_jumps_a_waiter_that_could_go() -> None:
    """After a limit rises, a waiter that could go has priority over a new
    arrival until ``admit_next`` runs (the reference's rule)."""
    table: PoolTable[str] = PoolTable(["cap:a", "cap:b"], PoolDeclarations(capacities={"cap:a": 1}))
    assert table.arrive("cap:a", "a1") is None
    assert table.arrive("cap:a", "a2") == 1
    assert table.arrive("cap:b", "b1") is None  # the waiter cannot go: b is admitted
    table.apply_desired({"cap:a": 2})
    assert table.arrive("cap:b", "b2") == 1  # a2 could go now: b2 waits behind it
    assert table.admit_next() == ("cap:a", "a2")
    assert table.admit_next() == ("cap:b", "b2")
    assert table.admit_next() is None
    runtime = pytest.importorskip("capdag.bifaci.cartridge_runtime")
    pools = pytest.importorskip("capdag.bifaci.pools")
    theirs = runtime.RuntimePools(
        ["cap:a", "cap:b"], pools.PoolDeclarations(capacities={"cap:a": 1})
    )
    assert [
        theirs.arrive("cap:a", "a1"),
        theirs.arrive("cap:a", "a2"),
        theirs.arrive("cap:b", "b1"),
    ] == [None, 1, None]
    theirs.apply_desired({"cap:a": 2})
    assert theirs.arrive("cap:b", "b2") == 1
    assert theirs.admit_next() == ("cap:a", "a2")
    assert pools.encode_pool_states(theirs.snapshot()) != b""
