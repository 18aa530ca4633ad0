"""Building a machine from Python: the same :class:`Machine` the notation makes.

A builder names value nodes and steps the way a text does, and resolves them with the same
rules (:func:`parse_machine`'s phases after the text is read)::

    machine = (
        MachineBuilder(caps)
        .value("doc", media="media:enc=utf-8")
        .value("sep", ", ")
        .step("words", WORDS, inputs={"text": "doc"}, outputs={"words": "ws"})
        .step("join", JOIN, inputs={"words": "ws", "sep": "sep"}, outputs={"text": "out"})
        .build()
    )

In ``inputs`` a string names a node (a declared value, or a step's output); any other JSON
value is a constant, and so is a value node declared with a value. Every binding names its
arg and every output its name, so nothing is matched by type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn, UrnError

from ._constant import checked_constant
from ._errors import (
    DuplicateAliasError,
    EmptyMachineError,
    InvalidCapUrnError,
    InvalidMediaUrnError,
    NodeAliasCollisionError,
    ParseError,
    ReservedNodeNameError,
)
from ._grammar import is_name
from ._include import components
from ._model import Machine, build_machine
from ._strand import resolve_strand
from ._syntax import RESERVED_NODE_NAMES, OnError, StepPolicy
from ._types import type_nodes
from ._wiring import CapTable, StepWiring, Value, Where, WiredMember, WiredTarget

__all__ = ("MachineBuilder",)

_NO_VALUE: Final = object()


class MachineBuilder:
    """Collects value nodes and steps; :meth:`build` resolves them into a :class:`Machine`.

    :param caps: the cap definitions the steps name.
    """

    def __init__(self, caps: Iterable[CapDef]) -> None:
        self._caps = CapTable(caps)
        self._media: dict[str, MediaUrn] = {}
        self._constants: dict[str, Any] = {}
        self._steps: list[StepWiring] = []
        self._cap_of: dict[str, CapUrn] = {}

    def _name(self, name: str, what: str) -> str:
        if not isinstance(name, str) or not is_name(name):
            raise ParseError(
                f"{what} {name!r} is not a name (a letter or _, then letters, digits, _ or -)"
            )
        if name in RESERVED_NODE_NAMES:
            raise ReservedNodeNameError(f"'{name}' is a constant, not a node name")
        return name

    def value(
        self, name: str, value: Any = _NO_VALUE, *, media: str | None = None
    ) -> MachineBuilder:
        """Declare a value node: an input of the machine of type ``media``, or, given
        ``value``, a constant every step it is bound into receives.

        :raises MachineError: a bad name, a node declared twice, a bad media URN or constant.
        """
        self._name(name, "value")
        if name in self._media or name in self._constants:
            raise DuplicateAliasError(f"value '{name}' is declared twice")
        if value is not _NO_VALUE:
            try:
                self._constants[name] = checked_constant(value)
            except ValueError as error:
                raise ParseError(f"value '{name}': {error}") from None
        if media is not None:
            try:
                self._media[name] = MediaUrn.parse(media)
            except UrnError as error:
                raise InvalidMediaUrnError(
                    f"value '{name}': the media URN does not parse: {error}"
                ) from None
        return self

    def step(
        self,
        alias: str,
        cap: str | CapUrn | CapDef,
        *,
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, str] | None = None,
        retry: int = 0,
        on_error: OnError | str = OnError.FAIL,
    ) -> MachineBuilder:
        """Add one invocation of ``cap`` under ``alias``: ``inputs`` maps arg names to node
        names or constants, ``outputs`` output names to the nodes that take them.

        :raises MachineError: a bad or repeated alias, a cap URN that does not parse.
        """
        self._name(alias, "step")
        if alias in self._cap_of:
            raise DuplicateAliasError(f"step '{alias}' is declared twice")
        text = cap.urn if isinstance(cap, CapDef) else str(cap)
        try:
            self._cap_of[alias] = CapUrn.parse(text)
        except UrnError as error:
            raise InvalidCapUrnError(
                f"step '{alias}': the cap URN does not parse: {error}"
            ) from None
        members = []
        for arg, given in (inputs or {}).items():
            if isinstance(given, str):
                self._name(given, f"the node given to arg '{arg}' of step '{alias}'")
                if given in self._constants:
                    members.append(WiredMember(arg, Value(constant=self._constants[given])))
                else:
                    members.append(WiredMember(arg, Value(node=given)))
            else:
                try:
                    members.append(WiredMember(arg, Value(constant=checked_constant(given))))
                except ValueError as error:
                    raise ParseError(f"step '{alias}', arg '{arg}': {error}") from None
        targets = [
            WiredTarget(output, self._name(node, f"the node output '{output}' goes to"))
            for output, node in (outputs or {}).items()
        ]
        policy = StepPolicy(retry=retry, on_error=OnError(on_error))
        self._steps.append(
            StepWiring(
                sources=members,
                step=alias,
                policy=policy,
                targets=targets,
                where=Where(len(self._steps)),
                label=alias,
            )
        )
        return self

    def build(self) -> Machine:
        """Resolve the steps into a machine.

        :raises MachineError: what :func:`parse_machine` would raise for the same machine.
        """
        if not self._steps:
            raise EmptyMachineError("the builder has no step")
        for wiring in self._steps:
            for node in wiring.nodes():
                if node in self._cap_of:
                    raise NodeAliasCollisionError(f"node '{node}' has the name of a step")
        resolved = []
        for group in components(self._steps):
            members = [self._steps[i] for i in group]
            held = type_nodes(members, self._caps, self._cap_of, {}, self._media)
            resolved.append(resolve_strand(members, held, self._caps, self._cap_of))
        return build_machine(resolved)
