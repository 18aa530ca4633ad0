"""The wirings of one machine as the resolver reads them: steps by cap URN, nodes by name.

This is the form between the statements (:mod:`._syntax`) and a resolved strand
(:mod:`._strand`): a step's alias is already looked up, machines in step position are already
written out as their steps (:mod:`._include`), and every value knows the statement it came
from, so that a refusal can say where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import CapUrn, MediaUrn

from ._errors import MachineError, UnknownCapError
from ._media import MediaTable
from ._syntax import StepPolicy

__all__ = ("Value", "WiredMember", "WiredTarget", "StepWiring", "Where", "CapTable")


@attrs.frozen
class Where:
    """The statement something was written in."""

    statement: int
    line: int | None = None
    column: int | None = None

    def locate(self, error: MachineError) -> MachineError:
        return error.located(self.statement, self.line, self.column)


@attrs.frozen
class Value:
    """What a member gives its arg: a node by name, or a constant."""

    node: str | None = None
    constant: Any = None

    @property
    def is_constant(self) -> bool:
        return self.node is None


@attrs.frozen
class WiredMember:
    name: str | None
    value: Value


@attrs.define
class WiredTarget:
    name: str | None
    node: str


@attrs.define
class StepWiring:
    """One wiring: its members in the order written, its step, its targets."""

    sources: list[WiredMember]
    step: str  #: the step's alias (a header's alias, or ``use#n/i`` for an included step)
    policy: StepPolicy
    targets: list[WiredTarget]
    where: Where
    label: str | None  #: the alias the text gave the step; None for an included one
    included_as: tuple[str, ...] = ()

    def source_nodes(self) -> list[str]:
        return [m.value.node for m in self.sources if m.value.node is not None]

    def nodes(self) -> list[str]:
        return self.source_nodes() + [t.node for t in self.targets]

    def unnamed_nodes(self) -> list[str]:
        return [m.value.node for m in self.sources if m.name is None and m.value.node is not None]


@attrs.frozen
class CapShape:
    """What resolution reads of a cap definition, worked out once per cap.

    :ivar accepts: per arg, what a value bound to it must conform to.
    :ivar slots: per arg, its own media URN (its identity).
    :ivar primary: the index of the main input, or None when the cap takes none (``in=`` is
        void) or no arg has ``in=`` as its stdin source (``has_input`` then says which).
    """

    accepts: tuple[MediaUrn, ...]
    slots: tuple[MediaUrn, ...]
    primary: int | None
    has_input: bool
    by_name: Mapping[str, int]


class CapTable:
    """The caps a machine is resolved against, by canonical cap URN."""

    def __init__(self, caps: Any, media: MediaTable | None = None) -> None:
        self._by_urn: dict[str, CapDef] = {}
        self._shapes: dict[str, CapShape] = {}
        #: The media definitions constants are held to, or None: constants are not checked.
        self.media = media
        for cap in caps:
            if not isinstance(cap, CapDef):
                raise TypeError(
                    f"a machine is resolved against CapDef values, not {type(cap).__name__}"
                )
            self._by_urn.setdefault(cap.urn, cap)

    def get(self, cap: CapUrn) -> CapDef:
        """The definition of ``cap``.

        :raises UnknownCapError: none of the caps has that URN.
        """
        found = self._by_urn.get(cap.text)
        if found is None:
            raise UnknownCapError(f"cap URN '{cap.text}' is none of the caps given")
        return found

    def shape(self, cap: CapUrn) -> CapShape:
        """The cap's :class:`CapShape` (cached).

        :raises UnknownCapError: none of the caps has that URN.
        """
        shape = self._shapes.get(cap.text)
        if shape is None:
            from ._order import is_main_input, main_input_media, media

            definition = self.get(cap)
            in_spec = main_input_media(cap)
            primary = None
            if in_spec is not None:
                primary = next(
                    (i for i, a in enumerate(definition.args) if is_main_input(a, in_spec)), None
                )
            shape = self._shapes[cap.text] = CapShape(
                accepts=tuple(media(a.accepted_urn) for a in definition.args),
                slots=tuple(media(a.media_urn) for a in definition.args),
                primary=primary,
                has_input=in_spec is not None,
                by_name={a.name: i for i, a in reversed(list(enumerate(definition.args)))},
            )
        return shape

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._by_urn.values())
