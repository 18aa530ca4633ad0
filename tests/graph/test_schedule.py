"""The scheduler's decisions as data: start rule, growth, failure, step controls."""

from __future__ import annotations

from cartridge_runtime.graph import GraphModel, NodeState, Schedule

TEXT = "media:text;textable"
CAP = 'cap:in="media:text;textable";op=step;out="media:text;textable"'


def chain(g: GraphModel, n: int) -> list[str]:
    names = [g.add_value_node(b"x", media=TEXT)]
    for _ in range(n):
        names.append(g.instantiate_with_deps(CAP, {TEXT: names[-1]}))
    return names


def test_value_nodes_are_done_and_never_handed_out() -> None:  # DAG-4
    g = GraphModel()
    v = g.add_value_node(b"x", media=TEXT)
    s = Schedule(g)
    assert s.state(v) is NodeState.DONE
    assert s.get_ready() == () and not s.is_active()


def test_a_chain_runs_one_node_after_another() -> None:
    g = GraphModel()
    v, a, b = chain(g, 2)
    s = Schedule(g)
    assert s.get_ready() == (a,)
    assert s.get_ready() == ()  # handed out once
    assert s.is_active()
    s.done(a)
    assert s.get_ready() == (b,)
    s.done(b)
    assert not s.is_active()
    assert s.states == {v: NodeState.DONE, a: NodeState.DONE, b: NodeState.DONE}


def test_a_reader_starts_at_its_inputs_first_bytes() -> None:  # DAG-34, DAG-35
    g = GraphModel()
    _, a, b = chain(g, 2)
    s = Schedule(g)
    s.get_ready()
    assert s.get_ready() == ()
    s.produced(a)
    assert s.state(a) is NodeState.STREAMING
    assert s.get_ready() == (b,)


def test_an_empty_alias_contributes_nothing() -> None:  # DAG-34
    g = GraphModel()
    g.alias(".media")
    n = g.instantiate_with_deps(CAP, {TEXT: ".media"})
    assert Schedule(g).get_ready() == (n,)


def test_only_what_the_target_reaches_runs() -> None:  # DAG-33, DAG-36
    g = GraphModel()
    _, a, b = chain(g, 2)
    other = g.instantiate_with_deps(CAP, {TEXT: "value-1"})
    s = Schedule(g, [a])
    assert s.get_ready() == (a,)
    s.done(a)
    assert s.get_ready() == () and not s.is_active()
    assert s.state(b) is NodeState.WAITING and s.state(other) is NodeState.WAITING


def test_growth_through_an_alias_alone_is_seen_at_once() -> None:  # open point 1
    g = GraphModel()
    v = g.add_value_node(b"p", media=TEXT)
    g.alias(".out")
    reader = g.instantiate_with_deps(CAP, {TEXT: ".out"})
    r1 = g.instantiate_with_deps(CAP, {TEXT: v})
    g.alias(".out", r1)
    s = Schedule(g, [reader])
    assert s.get_ready() == (r1,)
    # r1, while running, adds its next iteration: a node first, then the alias append.
    r2 = g.instantiate_with_deps(CAP, {TEXT: v})
    assert s.get_ready() == ()  # not reachable yet
    g.alias(".out", r2)  # changes no node name, only an alias
    assert s.get_ready() == (r2,)
    s.done(r1)
    s.done(r2)
    assert s.get_ready() == (reader,)


def test_a_failure_skips_its_readers_with_a_reason_naming_it() -> None:
    g = GraphModel()
    v, a, b = chain(g, 2)
    c = g.instantiate_with_deps(CAP, {TEXT: b})
    side = g.instantiate_with_deps(CAP, {TEXT: v})
    s = Schedule(g)
    assert set(s.get_ready()) == {a, side}
    s.failed(a, "boom")
    assert s.get_ready() == ()
    assert s.state(b) is NodeState.SKIPPED and s.reasons[b] == f"input {a} failed"
    assert s.state(c) is NodeState.SKIPPED and s.reasons[c] == f"input {b} skipped"
    assert s.is_active()  # side still runs
    s.done(side)
    assert not s.is_active()
    assert s.first_failure == (a, "boom")


def test_a_node_added_after_a_failure_that_reads_it_is_skipped() -> None:
    g = GraphModel()
    _, a = chain(g, 1)
    s = Schedule(g)
    s.get_ready()
    s.failed(a, "boom")
    late = g.instantiate_with_deps(CAP, {TEXT: a})
    assert s.get_ready() == ()
    assert s.state(late) is NodeState.SKIPPED


def test_stop_before_ends_the_run_without_starting_that_node() -> None:  # DAG-40
    g = GraphModel()
    _, a, b = chain(g, 2)
    s = Schedule(g, stop_before=[b])
    assert s.get_ready() == (a,)
    s.done(a)
    assert s.get_ready() == ()
    assert not s.is_active()
    s.finish()
    assert s.state(b) is NodeState.SKIPPED and s.reasons[b] == f"stopped before {b}"


def test_one_step_hands_out_one_node() -> None:  # DAG-40
    g = GraphModel()
    v = g.add_value_node(b"x", media=TEXT)
    a = g.instantiate_with_deps(CAP, {TEXT: v})
    b = g.instantiate_with_deps(CAP, {TEXT: v})
    s = Schedule(g, one_step=True)
    assert s.get_ready() == (a,)
    s.done(a)
    assert s.get_ready() == () and not s.is_active()
    s.finish()
    assert s.state(b) is NodeState.SKIPPED


def test_a_stop_starts_nothing_more() -> None:
    g = GraphModel()
    _, a, b = chain(g, 2)
    s = Schedule(g)
    s.get_ready()
    s.stop("cancelled")
    s.done(a)
    assert s.get_ready() == () and not s.is_active()
    s.finish()
    assert s.reasons[b] == "cancelled"


def test_loaded_finished_nodes_are_not_run_again() -> None:  # DAG-56
    g = GraphModel()
    _, a, b = chain(g, 2)
    s = Schedule(g, states={a: NodeState.DONE, b: NodeState.FAILED})
    assert s.get_ready() == (b,)


def test_a_thousand_node_chain_decides_each_node_once() -> None:
    g = GraphModel()
    names = chain(g, 1000)
    s = Schedule(g)
    order = []
    while s.is_active():
        ready = s.get_ready()
        assert len(ready) == 1
        order.extend(ready)
        s.done(ready[0])
    assert order == names[1:]


def test_without_streaming_a_reader_waits_for_its_inputs_to_finish() -> None:
    g = GraphModel()
    _, a, b = chain(g, 2)
    s = Schedule(g, streaming=False)
    s.get_ready()
    s.produced(a)
    assert s.get_ready() == ()
    s.done(a)
    assert s.get_ready() == (b,)
