"""Reading machine notation into a :class:`Machine` (MCH-1 .. MCH-11).

The phases, in the reference's order (which decides which refusal a text with several faults
gets): the statements; the headers (each cap URN parses, no alias declared twice); at least one
wiring; the machines named by machine headers, each resolved alone; step names looked up in
the alias table; every step defined and no node named like a step; machine steps written out
as their steps; then, strand by strand, the nodes typed and the strand resolved.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn, UrnError

from ._errors import (
    AliasNotACapError,
    CyclicMachineReferenceError,
    DuplicateAliasError,
    EmptyMachineError,
    InvalidCapUrnError,
    InvalidIncludedMachineError,
    MachineError,
    MachineReferenceWithoutSourceError,
    NodeAliasCollisionError,
    NoEdgesError,
    UndefinedAliasError,
    UnknownMachineReferenceError,
)
from ._include import (
    IncludedMachine,
    MachineSource,
    MachineSourceError,
    components,
    included_view,
    write_in_machines,
)
from ._media import MediaDef, MediaTable
from ._model import Machine, build_machine
from ._strand import resolve_strand
from ._syntax import Statement, StatementKind, read_statements
from ._types import MachineShape, type_nodes
from ._wiring import CapTable, StepWiring, Value, Where, WiredMember, WiredTarget

__all__ = ("parse_machine",)


def parse_machine(
    text: str,
    caps: Iterable[CapDef],
    *,
    source: MachineSource | None = None,
    origin: str | None = None,
    aliases: Mapping[str, str] | None = None,
    media: Iterable[MediaDef | Mapping[str, Any]] | None = None,
) -> Machine:
    """Parse and resolve machine notation against ``caps``.

    :param source: where machine headers' references are read from; without one a machine
        header is refused (``MachineReferenceWithoutSourceError``).
    :param origin: the id ``source`` knows this text by (its file's real path, for
        :class:`FileMachineSource`): references are read relative to it, and an inclusion of
        it from inside is a circle.
    :param aliases: step names that need no header, each mapped to a cap URN (like a registry's
        cap aliases). Without it a step is defined only by a header in the text.
    :param media: media definitions (:class:`MediaDef`, or their registry JSON) that constants
        are held to: each constant must satisfy the definition of its arg's media URN. Without
        them constants are not checked.
    :raises MachineError: the subclass says what failed, ``kind`` names it as the reference
        does, and ``line`` / ``column`` say where.
    """
    table = (
        caps
        if isinstance(caps, CapTable)
        else CapTable(caps, MediaTable(media) if media is not None else None)
    )
    return _parse(text, table, source, origin, aliases or {}, [] if origin is None else [origin])


def _wiring_of(statement: Statement) -> StepWiring:
    written = statement.wiring
    assert written is not None
    return StepWiring(
        sources=[
            WiredMember(m.name, Value(node=m.node, constant=m.constant)) for m in written.sources
        ],
        step=written.step,
        policy=written.policy,
        targets=[WiredTarget(t.name, t.node) for t in written.targets],
        where=Where(statement.position, statement.line, statement.column),
        label=written.step,
    )


def _include(
    alias: str,
    reference: str,
    table: CapTable,
    source: MachineSource | None,
    origin: str | None,
    aliases: Mapping[str, str],
    including: list[str],
) -> IncludedMachine:
    if source is None:
        raise MachineReferenceWithoutSourceError(
            f"machine step '{alias}' names machine \"{reference}\", but this text is read with no "
            "machine source to resolve it against"
        )
    try:
        loaded = source.load(reference, origin)
    except MachineSourceError as error:
        raise UnknownMachineReferenceError(
            f"machine step '{alias}': no machine \"{reference}\": {error}"
        ) from None
    if loaded.id in including:
        chain = [*including[including.index(loaded.id) :], loaded.id]
        raise CyclicMachineReferenceError("a machine includes itself: " + " -> ".join(chain))
    including.append(loaded.id)
    try:
        inner = _parse(loaded.text, table, source, loaded.id, aliases, including)
    except CyclicMachineReferenceError:
        raise
    except MachineError as error:
        wrapped = InvalidIncludedMachineError(
            f"machine step '{alias}' (\"{reference}\") is not a valid machine: "
            f"{error.kind}: {error}"
        )
        wrapped.cause = error
        raise wrapped from None
    finally:
        including.pop()
    return included_view(inner)


def _parse(
    text: str,
    table: CapTable,
    source: MachineSource | None,
    origin: str | None,
    aliases: Mapping[str, str],
    including: list[str],
) -> Machine:
    text = text.strip()
    if not text:
        raise EmptyMachineError("the machine text is empty")
    statements = read_statements(text)

    cap_of: dict[str, CapUrn] = {}
    machine_headers: list[Statement] = []
    declared: dict[str, Statement] = {}
    wirings: list[StepWiring] = []
    for statement in statements:
        where = Where(statement.position, statement.line, statement.column)
        if statement.kind is StatementKind.CAP_HEADER:
            try:
                cap = CapUrn.parse(statement.cap_urn)
            except UrnError as error:
                reason = f" ({error.reason})" if getattr(error, "reason", None) else ""
                raise where.locate(
                    InvalidCapUrnError(
                        f"header '{statement.alias}': the cap URN does not parse: {error}{reason}"
                    )
                ) from None
            cap_of.setdefault(statement.alias, cap)
        elif statement.kind is StatementKind.MACHINE_HEADER:
            machine_headers.append(statement)
        else:
            wirings.append(_wiring_of(statement))
            continue
        first = declared.setdefault(statement.alias, statement)
        if first is not statement:
            raise where.locate(
                DuplicateAliasError(
                    f"alias '{statement.alias}' is declared twice (first in statement "
                    f"{first.position + 1}, line {first.line})"
                )
            )
    if not wirings:
        if declared:
            raise NoEdgesError("the machine has headers but no wiring (sources -> step -> targets)")
        raise EmptyMachineError("the machine text has no statement")

    machines: dict[str, IncludedMachine] = {}
    for header in machine_headers:
        where = Where(header.position, header.line, header.column)
        try:
            machines[header.alias] = _include(
                header.alias, header.reference, table, source, origin, aliases, including
            )
        except MachineError as error:
            raise where.locate(error) from None

    for wiring in wirings:
        name = wiring.step
        if name in cap_of or name in machines or name not in aliases:
            continue
        try:
            cap_of[name] = CapUrn.parse(aliases[name])
        except UrnError:
            raise wiring.where.locate(
                AliasNotACapError(
                    f"step '{name}' is an alias of '{aliases[name]}', which is not a cap URN"
                )
            ) from None

    for wiring in wirings:
        if wiring.step not in cap_of and wiring.step not in machines:
            near = difflib.get_close_matches(wiring.step, [*cap_of, *machines], n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
            raise wiring.where.locate(
                UndefinedAliasError(
                    f"step '{wiring.step}' is defined by no header "
                    f"(write '{wiring.step} cap:...'){hint}"
                )
            )
        for node in wiring.nodes():
            if node in cap_of or node in machines:
                raise wiring.where.locate(
                    NodeAliasCollisionError(f"node '{node}' has the name of a step")
                )

    included_media: dict[str, MediaUrn] = {}
    if any(w.step in machines for w in wirings):
        wirings = write_in_machines(wirings, table, cap_of, machines, included_media)
    no_machines: dict[str, MachineShape] = {}
    resolved = []
    for group in components(wirings):
        members = [wirings[i] for i in group]
        held = type_nodes(members, table, cap_of, no_machines, included_media)
        resolved.append(resolve_strand(members, held, table, cap_of))
    return build_machine(resolved)
