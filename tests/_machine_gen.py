"""Machines generated over the fixed world of ``_machine_world``: a plan of steps (which cap,
what each arg is given, which outputs go where, the policy), written out as notation in many
layouts, or given to :class:`MachineBuilder`.

Plans are valid by construction: every arg is given a node whose type conforms to what it
accepts, or a constant; an input of the machine is shared only between args that accept the
same type (so no node's type is refined by where it is used); every unnamed member is the
main input of its step and every other member is named, so the types never leave a choice.
They cover chains, fan-out (one node given to several steps), fan-in (steps given several
nodes, and nodes made by several steps), per-item maps (a sequence given to an arg that takes
one value) and the folds that end them, constants of every JSON kind, policies, outputs not
taken, and several strands.
"""

from __future__ import annotations

import json
from typing import Any, Final

import attrs
from _machine_world import CAPS, FACTOR, IDENTITY, NUMBER, RECORD, SEP, TEXT, WORD
from hypothesis import strategies as st

from cartridge_runtime.machine import MachineBuilder
from cartridge_runtime.urn import MediaUrn

RIGHT: Final = f"{TEXT};right"
ANY: Final = "media:"


@attrs.frozen
class CapSpec:
    urn: str
    args: tuple[tuple[str, str, bool], ...]  #: (name, accepted type, is the main input)
    outputs: tuple[tuple[str, str, bool], ...]  #: (name, type, is a sequence)
    #: Args that may take a constant (beyond the main input, which never does here).
    constants: tuple[str, ...] = ()


SPECS: Final = {
    "identity": CapSpec(IDENTITY, (("input", ANY, True),), (("output", ANY, False),)),
    "words": CapSpec(
        'cap:in="media:enc=utf-8";op=words;out="media:enc=utf-8;word"',
        (("text", TEXT, True),),
        (("words", WORD, True),),
    ),
    "upper": CapSpec(
        'cap:in="media:enc=utf-8;word";op=upper;out="media:enc=utf-8;word"',
        (("word", WORD, True),),
        (("upper", WORD, False),),
    ),
    "join": CapSpec(
        'cap:in="media:enc=utf-8;word";op=join;out="media:enc=utf-8"',
        (("words", WORD, True), ("sep", SEP, False)),
        (("text", TEXT, False),),
        ("sep",),
    ),
    "count": CapSpec(
        'cap:in="media:enc=utf-8";op=count;out="media:integer;numeric"',
        (("text", TEXT, True),),
        (("count", NUMBER, False),),
    ),
    "split": CapSpec(
        'cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8"',
        (("text", TEXT, True),),
        (("head", TEXT, False), ("stats", RECORD, False)),
    ),
    "scale": CapSpec(
        'cap:in="media:fmt=json;record";op=scale;out="media:fmt=json;record"',
        (("record", RECORD, True), ("factor", FACTOR, False)),
        (("record", RECORD, False),),
        ("factor",),
    ),
    "pair": CapSpec(
        'cap:in="media:enc=utf-8";op=pair;out="media:enc=utf-8"',
        (("left", TEXT, True), ("right", RIGHT, False)),
        (("text", TEXT, False),),
        ("right",),
    ),
}


@attrs.frozen
class Given:
    arg: str
    node: str | None = None
    constant: Any = None
    unnamed: bool = False


@attrs.frozen
class PlannedStep:
    alias: str  #: the header alias the wiring names
    cap: str  #: a key of SPECS
    given: tuple[Given, ...]
    taken: tuple[tuple[str, str, bool], ...]  #: (output, node, unnamed)
    retry: int = 0
    absent: bool = False


@attrs.frozen
class Plan:
    steps: tuple[PlannedStep, ...]
    inputs: tuple[tuple[str, str], ...]  #: the machine's inputs: (node, type)

    @property
    def aliases(self) -> dict[str, str]:
        """Header alias → cap key, in the order first used."""
        out: dict[str, str] = {}
        for step in self.steps:
            out.setdefault(step.alias, step.cap)
        return out


def _conforms(node_type: str, accepted: str) -> bool:
    return MediaUrn.parse(node_type).conforms_to(MediaUrn.parse(accepted))


#: Caps to draw from: ``words`` and ``upper`` more often, so maps are common.
_CHOICES: Final = [*sorted(SPECS), "words", "upper", "upper"]

# -- constants ----------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.1, 1e300, 5e-324, 1e16, 1e21, 123456789.125, -2.5e-7]),
    st.text(max_size=8),
    st.sampled_from(['"', "\\", "\n\t", "é", "😀", "\u2028", "/", "]", "a=b"]),
)
constants = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


# -- plans --------------------------------------------------------------------------------


@st.composite
def plans(draw: st.DrawFn, max_steps: int = 8) -> Plan:
    """A valid machine plan of 1 .. ``max_steps`` steps."""
    produced: list[tuple[str, str, bool]] = []  # (node, type, made by a sequence output)
    inputs: dict[str, str] = {}
    steps: list[PlannedStep] = []
    aliases: dict[str, list[str]] = {}
    consumed: set[str] = set()
    counter = iter(range(10_000))

    def fresh(prefix: str = "v") -> str:
        return f"{prefix}{next(counter)}"

    for _ in range(draw(st.integers(1, max_steps))):
        cap = draw(st.sampled_from(_CHOICES))
        spec = SPECS[cap]
        given: list[Given] = []
        for name, accepted, main in spec.args:
            fits = [n for n, t, _ in produced if _conforms(t, accepted)]
            fits += [n for n, t in inputs.items() if t == accepted]
            choices = ["new"] + (["node"] * 3 if fits else [])
            if name in spec.constants:
                choices += ["constant"] * 2
            how = draw(st.sampled_from(choices))
            if how == "constant":
                given.append(Given(name, constant=draw(constants)))
                continue
            if how == "node":
                node = draw(st.sampled_from(fits))
            else:
                node = fresh("in")
                inputs[node] = accepted
            consumed.add(node)
            given.append(Given(name, node=node, unnamed=main and draw(st.booleans())))
        taken: list[tuple[str, str, bool]] = []
        for index, (output, kind, sequence) in enumerate(spec.outputs):
            main = index == 0
            if not draw(st.integers(0, 9)) and (main or not taken):
                continue  # an output not taken
            if main or draw(st.booleans()):
                # Only a node no step is given yet: it is upstream of nothing, so a second
                # maker closes no circle.
                same = [n for n, t, s in produced
                        if t == kind and s == sequence and n not in consumed]  # fmt: skip
                if same and not draw(st.integers(0, 5)):
                    node = draw(st.sampled_from(same))  # a node made by two steps
                else:
                    node = fresh()
                    produced.append((node, kind, sequence))
                taken.append((output, node, main and draw(st.booleans())))
        own = aliases.setdefault(cap, [cap])
        if draw(st.integers(0, 4)) == 0:
            own.append(f"{cap}-{len(own)}")
        alias = draw(st.sampled_from(own))
        retry = draw(st.sampled_from([0, 0, 0, 1, 3, 2**32 - 1]))
        steps.append(PlannedStep(alias, cap, tuple(given), tuple(taken), retry,
                                 draw(st.integers(0, 4)) == 0))  # fmt: skip
    return Plan(tuple(steps), tuple(inputs.items()))


# -- writing ------------------------------------------------------------------------------


def constant_json(value: Any, *, ascii_only: bool = True) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


@st.composite
def texts(draw: st.DrawFn, plan: Plan) -> str:
    """``plan`` written as notation: headers placed anywhere before the first use or after,
    line-based, bracketed or mixed statements, members and targets in any order, any spacing
    and arrow length."""
    space = st.sampled_from(["", " ", "  ", "\t", "\n "])

    def arrow(after: str) -> str:
        # An alias runs on through '-': after one, the arrow needs a space before it.
        before = draw(space)
        if not before and (after[-1].isalnum() or after[-1] in "_-"):
            before = " "
        return before + "-" * draw(st.integers(1, 3)) + ">" + draw(space)

    wirings: list[str] = []
    for step in plan.steps:
        members = []
        for g in step.given:
            if g.node is None:
                value = constant_json(g.constant, ascii_only=draw(st.booleans()))
                members.append(f"{g.arg}{draw(space)}={draw(space)}{value}")
            elif g.unnamed:
                members.append(g.node)
            else:
                members.append(f"{g.arg}={g.node}")
        members = draw(st.permutations(members))
        if len(members) == 1 and "=" not in members[0] and draw(st.booleans()):
            sources = members[0]
        else:
            sources = "(" + ("," + draw(space)).join(members) + ")"
        targets_list = [node if unnamed else f"{output}={node}"
                        for output, node, unnamed in step.taken]  # fmt: skip
        targets_list = draw(st.permutations(targets_list))
        if len(targets_list) == 1 and "=" not in targets_list[0] and draw(st.booleans()):
            targets = targets_list[0]
        else:
            targets = "(" + ", ".join(targets_list) + ")"
        policy = []
        if step.retry:
            policy.append(f"retry={step.retry}")
        if step.absent:
            policy.append("on_error=absent")
        if len(policy) == 2 and draw(st.booleans()):
            policy.reverse()
        written = step.alias + ("{" + ", ".join(policy) + "}" if policy else "")
        wirings.append(f"{sources}{arrow(sources)}{written}{arrow(written)}{targets}")
    headers = [f"{alias} {SPECS[cap].urn}" for alias, cap in plan.aliases.items()]
    statements = list(wirings)
    for header in headers:
        statements.insert(draw(st.integers(0, len(statements))), header)
    out = []
    for statement in statements:
        if draw(st.booleans()):
            out.append(f"[{statement}]" + draw(st.sampled_from(["", " ", "\n"])))
        else:
            out.append(statement + draw(st.sampled_from(["\n", "\r\n", "\n\n"])))
    return draw(space) + "".join(out) + draw(space)


def build(plan: Plan, *, declare_inputs: bool = False) -> Any:
    """``plan`` through :class:`MachineBuilder`."""
    builder = MachineBuilder(CAPS)
    if declare_inputs:
        for node, kind in plan.inputs:
            builder.value(node, media=kind)
    count = 0
    for index, step in enumerate(plan.steps):
        inputs: dict[str, Any] = {}
        for g in step.given:
            if g.node is not None:
                inputs[g.arg] = g.node
            elif isinstance(g.constant, str):
                count += 1
                name = f"const{count}"
                builder.value(name, g.constant)
                inputs[g.arg] = name
            else:
                inputs[g.arg] = g.constant
        # A builder's alias names one step; the plan's may name several wirings.
        builder.step(f"{step.alias}-{index}", SPECS[step.cap].urn, inputs=inputs,
                     outputs={output: node for output, node, _ in step.taken},
                     retry=step.retry, on_error="absent" if step.absent else "fail")  # fmt: skip
    return builder.build()


__all__ = ("SPECS", "Plan", "PlannedStep", "Given", "plans", "texts", "build", "constants",
           "constant_json")  # fmt: skip
