"""Taps: any named node of a machine given back by a run, not only its outputs (MCH-28).

A run gives back the machine's outputs; ``outputs=[names]`` asks for other nodes too (an
intermediate node, or a node made per item of a map, which comes back as the sequence of its
items in item order), and ``outputs="all"`` for every node the text named. A tapped node
inside a map is collected out to the machine's own scope like an output is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...machine import Machine
from ._events import MachineInputError

__all__ = ("given_back", "with_taps", "ALL_NODES")

#: ``outputs=ALL_NODES``: every named node.
ALL_NODES = "all"


def given_back(machine: Machine, taps: Sequence[str] | str) -> dict[int, tuple[str, ...]]:
    """Per strand, the canonical names of the nodes a run gives back: the outputs, then the
    taps in the order asked (each once).

    :raises MachineInputError: a tap names no node of the machine.
    """
    wanted: list[str] = []
    if isinstance(taps, str):
        if taps != ALL_NODES:
            raise MachineInputError(taps, f"outputs= takes a list of node names or {ALL_NODES!r}")
        wanted = [n.name for n in machine.nodes if n.label]
    else:
        for name in taps:
            try:
                wanted.append(machine.node(name).name)
            except KeyError:
                known = ", ".join(sorted(n.label or n.name for n in machine.nodes))
                raise MachineInputError(
                    name, f"the machine has no node of that name (its nodes: {known})"
                ) from None
    back: dict[int, tuple[str, ...]] = {}
    for strand in machine.strands:
        names = list(strand.outputs)
        mine = {n.name for n in strand.nodes}
        for name in wanted:
            if name in mine and name not in names:
                names.append(name)
        back[strand.index] = tuple(names)
    return back


def with_taps(
    machine: Machine,
    collected: Mapping[tuple[int, int], frozenset[str]],
    back: Mapping[int, tuple[str, ...]],
) -> dict[tuple[int, int], frozenset[str]]:
    """The plan's collected nodes, with every tapped node made inside a map collected out
    through each enclosing map to the machine's own scope."""
    into = {key: set(names) for key, names in collected.items()}
    for strand in machine.strands:
        parents = strand.scope_parents
        for name in back[strand.index]:
            at = machine.node(name).scope
            while at != 0:
                at = parents[at]
                into.setdefault((strand.index, at), set()).add(name)
    return {key: frozenset(names) for key, names in into.items()}
