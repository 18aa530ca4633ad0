"""The media URN of every node of a strand (MCH-5).

Every node has one URN, derived from the wirings that touch it; where a member stands in its
group never decides it:

* a node some step makes has the URN of the output that makes it (an output that *carries*
  the input has the step's input type);
* a node nothing makes, named into an arg, has the type that arg accepts;
* an unnamed member that nothing else types is the step's main input and has the type the
  main input accepts (at most one such member per wiring, and only while no named member
  binds the main input); an unnamed member already typed but on the main input's
  specialization chain, alone in that, is refined to it;
* URNs given to one node lie on one specialization chain, and the node holds the most
  specific; others conflict.

The result does not depend on the order of the wirings: makers and names are read first for
all of them, then each wiring's main input, against what the first passes left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn

from ._errors import (
    MachineError,
    NodeMediaConflictError,
    UnknownArgNameError,
    UnknownMachineInputError,
    UnknownOutputNameError,
    UntypedMachineInputError,
    UntypedMachineMemberError,
)
from ._order import comparable, is_main_input, main_input_media, media
from ._wiring import CapTable, StepWiring

__all__ = ("MachineShape", "type_nodes")


class MachineShape(Protocol):
    """What a machine in step position shows the machine that includes it."""

    def input(self, name: str) -> MediaUrn | None: ...
    def output(self, name: str) -> MediaUrn | None: ...
    def input_names(self) -> list[str]: ...
    def output_names(self) -> list[str]: ...


def _give(held: dict[str, MediaUrn], node: str, urn: MediaUrn) -> None:
    existing = held.get(node)
    if existing is None:
        held[node] = urn
        return
    if not comparable(existing, urn):
        raise NodeMediaConflictError(
            f"node '{node}' is given '{existing}' and '{urn}', which are not on one "
            "specialization chain"
        )
    if urn.specificity > existing.specificity:
        held[node] = urn


def _unknown_arg(cap: CapDef, name: str) -> UnknownArgNameError:
    declared = ", ".join(f"'{a.name}'" for a in cap.args) or "none"
    return UnknownArgNameError(f"cap '{cap.urn}' has no arg named '{name}' (its args: {declared})")


def _unknown_output(cap: CapDef, name: str) -> UnknownOutputNameError:
    declared = ", ".join(f"'{o.name}'" for o in cap.outputs) or "none"
    return UnknownOutputNameError(
        f"cap '{cap.urn}' has no output named '{name}' (its outputs: {declared})"
    )


def _untyped(wiring: StepWiring, cap: str, nodes: Sequence[str]) -> UntypedMachineInputError:
    names = ", ".join(f"'{n}'" for n in nodes)
    return UntypedMachineInputError(
        f"step '{wiring.label or wiring.step}' ({cap}): nothing gives {names} a media URN; "
        "name the arg each is for (arg=node)"
    )


def type_nodes(
    wirings: Sequence[StepWiring],
    caps: CapTable,
    cap_of: Mapping[str, CapUrn],
    machines: Mapping[str, MachineShape],
    included_media: Mapping[str, MediaUrn],
) -> dict[str, MediaUrn]:
    """The media URN of every node the wirings touch.

    ``cap_of`` maps a step alias to its cap; ``machines`` the aliases of machine steps to
    their shape; ``included_media`` gives nodes written in from an included machine the type
    they held there.

    :raises MachineAbstractionError: an unknown cap, arg or output, a conflict, an untyped
        member (located at the wiring at fault).
    """
    held: dict[str, MediaUrn] = {}
    for wiring in wirings:
        for node in wiring.nodes():
            if node in included_media:
                _give(held, node, included_media[node])
    produced = {t.node for w in wirings for t in w.targets}
    for wiring in wirings:
        try:
            _type_from_makers_and_names(wiring, held, produced, caps, cap_of, machines)
        except MachineError as error:
            raise wiring.where.locate(error) from None
    refined: list[tuple[str, MediaUrn]] = []
    for wiring in wirings:
        if wiring.step in machines:
            continue
        unnamed = wiring.unnamed_nodes()
        if not unnamed:
            continue
        cap_urn = cap_of[wiring.step]
        definition = caps.get(cap_urn)
        main = main_input_media(cap_urn)
        main_named = False
        if main is not None:
            for arg in definition.args:
                if is_main_input(arg, main):
                    main_named = any(m.name == arg.name for m in wiring.sources)
                    break
        untyped = [node for node in unnamed if node not in held]
        if not untyped:
            if main is not None and not main_named:
                on_chain = [node for node in unnamed if comparable(held[node], main)]
                if len(on_chain) == 1:
                    refined.append((on_chain[0], main))
        elif len(untyped) == 1 and main is not None and not main_named:
            refined.append((untyped[0], main))
        else:
            raise wiring.where.locate(_untyped(wiring, cap_urn.text, untyped))
    for node, urn in refined:
        _give(held, node, urn)
    for wiring in wirings:
        if wiring.step not in machines:
            continue
        untyped = [node for node in wiring.unnamed_nodes() if node not in held]
        if untyped:
            names = ", ".join(f"'{n}'" for n in untyped)
            raise wiring.where.locate(
                UntypedMachineMemberError(
                    f"machine step '{wiring.step}': nothing gives {names} a media URN, and a "
                    "machine has no main input to match them by; name the input each is for"
                )
            )
    return held


def _type_from_makers_and_names(
    wiring: StepWiring,
    held: dict[str, MediaUrn],
    produced: set[str],
    caps: CapTable,
    cap_of: Mapping[str, CapUrn],
    machines: Mapping[str, MachineShape],
) -> None:
    machine = machines.get(wiring.step)
    if machine is not None:
        for target in wiring.targets:
            assert target.name is not None  # machine steps' targets are named before typing
            out = machine.output(target.name)
            assert out is not None
            _give(held, target.node, out)
        for member in wiring.sources:
            if member.name is None or member.value.node is None:
                continue
            accepts = machine.input(member.name)
            if accepts is None:
                declared = ", ".join(f"'{n}'" for n in machine.input_names()) or "none"
                raise UnknownMachineInputError(
                    f"machine step '{wiring.step}' has no input named '{member.name}' "
                    f"(its inputs: {declared})"
                )
            if member.value.node not in produced:
                _give(held, member.value.node, accepts)
        return
    cap_urn = cap_of[wiring.step]
    definition = caps.get(cap_urn)
    for target in wiring.targets:
        if target.name is None:
            urn = cap_urn.out_spec
        else:
            output = definition.output_named(target.name)
            if output is None:
                raise _unknown_output(definition, target.name)
            urn = media(output.media_urn)
            if output.carries is not None:
                main = main_input_media(cap_urn)
                if main is not None:
                    urn = main
        _give(held, target.node, urn)
    for member in wiring.sources:
        if member.name is None or member.value.node is None:
            continue
        arg = definition.arg_named(member.name)
        if arg is None:
            raise _unknown_arg(definition, member.name)
        if member.value.node not in produced:
            _give(held, member.value.node, media(arg.accepted_urn))
