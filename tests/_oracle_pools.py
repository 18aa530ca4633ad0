"""Pool admission against the formal model: chains, arrive, admit_next, release, capacities.

One case is one step of a random run over a small table: three caps with singleton pools,
two shared pools with random members, and ``all``, with capacities 0 (unlimited) to 2. A
step is an arrival (sometimes of a cap the table does not know), an ``admit_next``, the
release of an admitted request, a capacity change or a waiting request leaving the line.
After every step both sides must agree on the decision (admitted, queued with its ticket and
position, unknown pool; who ``admit_next`` lets in) and on the whole state: each pool's
capacity and active count, the line, each cap's room, each waiter's position and each
pool's held-back count. ``effective`` (configured against self-reported capacity) is
compared over its small domain as well.

The table is *closed*, as the cartridge's own (every admitted cap has its singleton pool):
the model's chain always starts with the cap's own pool, which an open table (the engine's
gate over the pools a cartridge announced) leaves out when it does not exist.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import capdag._formal as F
from _oracle_common import AreaResult

from cartridge_runtime.protocol import POOL_ALL, PoolAdmission, effective_capacity

CAPS = ("c0", "c1", "c2")
SHARED = ("s0", "s1")


class _Run:
    """One random run: our table and the model's state, stepped together."""

    def __init__(self, rng: random.Random, res: AreaResult) -> None:
        self.rng = rng
        self.res = res
        self.ours: PoolAdmission[int] = PoolAdmission(closed=True)
        self.model: Any = F.empty()
        self.shared: list[tuple[str, list[str]]] = []
        layout: list[tuple[str, int, tuple[str, ...]]] = [(c, rng.randint(0, 2), ()) for c in CAPS]
        for name in SHARED:
            members = tuple(c for c in CAPS if rng.random() < 0.5)
            layout.append((name, rng.randint(0, 2), members))
            self.shared.append((name, list(members)))
        layout.append((POOL_ALL, rng.randint(0, 3), ()))
        for name, capacity, members in layout:
            self.ours.add_pool(name, capacity, members)
            self.model = F.set_capacity(self.model, name, capacity)
        self.ticket = 0
        self.admitted: list[str] = []  # caps of the requests holding slots
        self.waiting: dict[int, str] = {}  # ticket -> cap
        self.log: list[str] = []

    def chain(self, cap: str) -> list[str]:
        return [p.name for p in self.ours.chain_pools(cap)]

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            self.arrive(rng.choice(CAPS) if rng.random() < 0.97 else "cx")
        elif roll < 0.6:
            self.admit_next()
        elif roll < 0.8:
            if self.admitted:
                self.release(self.admitted.pop(rng.randrange(len(self.admitted))))
            else:
                self.arrive(rng.choice(CAPS))
        elif roll < 0.9:
            self.set_capacity(rng.choice((*CAPS, *SHARED, POOL_ALL)), rng.randint(0, 3))
        elif self.waiting:
            self.leave(rng.choice(sorted(self.waiting)))
        else:
            self.admit_next()
        self.res.cases += 1
        self.compare_state()

    def where(self) -> str:
        return " ; ".join(self.log[-6:])

    def arrive(self, cap: str) -> None:
        self.log.append(f"arrive {cap}")
        try:
            chain = self.chain(cap)
        except LookupError:
            got = F.state_arrive(self.model, [cap, *self._model_shared(cap), POOL_ALL])
            unknown = isinstance(got, F.PoolsArrivalUnknownPool) and got.name == cap
            self.res.check(f"arrive unknown {cap} [{self.where()}]", True, unknown)
            return
        self.res.check(f"chain {cap}", chain, list(F.chain(cap, self.shared)))
        ticket = self.ticket
        ours = self.ours.arrive(cap, ticket)
        got = F.state_arrive(self.model, chain)
        if isinstance(got, F.PoolsArrivalAdmitted):
            theirs: object = None
            self.model = got.state
        elif isinstance(got, F.PoolsArrivalQueued):
            theirs = (got.ticket, got.position)
            self.model = got.state
        else:
            theirs = type(got).__name__
        self.ticket += 1
        if ours is None:
            self.admitted.append(cap)
            self.res.check(f"arrive {cap} [{self.where()}]", None, theirs)
        else:
            self.waiting[ticket] = cap
            self.res.check(f"arrive {cap} [{self.where()}]", (ticket, ours), theirs)

    def _model_shared(self, cap: str) -> list[str]:
        return [name for name, members in self.shared if cap in members]

    def admit_next(self) -> None:
        self.log.append("admit_next")
        ours = self.ours.admit_next()
        got = F.admit_next(self.model)
        if ours is not None:
            cap, ticket = ours
            del self.waiting[ticket]
            self.admitted.append(cap)
        if got is not None:
            waiter, self.model = got
            theirs: object = waiter.ticket
        else:
            theirs = None
        self.res.check(f"admit_next [{self.where()}]", None if ours is None else ours[1], theirs)

    def release(self, cap: str) -> None:
        self.log.append(f"release {cap}")
        chain = self.chain(cap)
        self.ours.release(cap)
        self.model = F.release(self.model, chain)

    def set_capacity(self, name: str, capacity: int) -> None:
        self.log.append(f"capacity {name}={capacity}")
        self.ours.pool(name).set_limits(capacity, None)
        self.model = F.set_capacity(self.model, name, capacity)

    def leave(self, ticket: int) -> None:
        self.log.append(f"leave {ticket}")
        taken = self.ours.remove_queued(lambda item: item == ticket)
        self.res.check(f"leave {ticket}", taken, ticket)
        del self.waiting[ticket]
        self.model = F.leave(self.model, ticket)

    def compare_state(self) -> None:
        res, model = self.res, self.model
        where = self.where()
        ours_pools = {name: (p.limit, p.active) for name, p in self.ours.pools.items()}
        theirs_pools = {p.name: (p.capacity, p.active) for p in model.pools}
        res.check(f"pools [{where}]", ours_pools, theirs_pools)
        line = [(t, self.chain(c)) for t, c in self.waiting.items()]
        res.check(f"line [{where}]", line, [(w.ticket, list(w.chain)) for w in model.queue])
        for cap in CAPS:
            res.check(
                f"has_room {cap} [{where}]",
                self.ours.has_room(cap),
                F.has_room(model, self.chain(cap)),
            )
        for ticket, cap in self.waiting.items():
            ours_pos = sum(1 for t, c in self.waiting.items() if c == cap and t <= ticket)
            res.check(f"position {ticket} [{where}]", ours_pos, F.position(model, ticket))
        for name, pool in self.ours.pools.items():
            res.check(
                f"held_back {name} [{where}]",
                self.ours.queued_on(pool),
                F.held_back(model, name),
            )


def compare_effective(res: AreaResult) -> None:
    """``effective_capacity`` over configured 0..6 and available none, 0..6."""
    for configured, available in itertools.product(range(7), (None, *range(7))):
        res.cases += 1
        res.check(
            f"effective {configured} {available}",
            effective_capacity(configured, available),
            F.effective(configured, available),
        )


def run(n: int, rng: random.Random) -> AreaResult:
    """At least ``n`` steps of random runs of 40 steps each, after ``effective``'s domain."""
    res = AreaResult("pool admission")
    compare_effective(res)
    while res.cases < n:
        one = _Run(rng, res)
        for _ in range(40):
            one.step()
    return res
