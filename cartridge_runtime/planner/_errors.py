"""Every way a planning query can be refused: one root, four classes.

The root is a ``ValueError`` like the other roots of refused input (``UrnError``,
``MachineError``): a query is refused before anything runs, so no ERR exists yet.
:attr:`PlannerError.kind` names the refusal as the reference names it, so a tool can match
refusals across implementations: a media text that does not parse keeps the URN layer's class
name (``WhitespaceInInputError``, ``MediaUrnError``, ...); the planner's own refusals use the
reference planner's class names (``InvalidInputError``, ``NotFoundError``).
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import DefinitionError

__all__ = (
    "PlannerError",
    "InvalidMediaError",
    "InvalidInputError",
    "NotFoundError",
    "KnitError",
)


class PlannerError(DefinitionError):
    """A planning query that is refused.

    :ivar kind: the reference's error class name for this refusal.
    :ivar message: what is wrong, in one line for a person.
    """

    rule: ClassVar[str] = "PLAN-20"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind: str = kind if kind is not None else type(self).__name__

    def __str__(self) -> str:
        return f"{self.message} [{self.rule}]"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.message, self.kind))


def _rebuild(cls: type[PlannerError], message: str, kind: str) -> PlannerError:
    return cls(message, kind=kind)


class InvalidMediaError(PlannerError):
    """The source or target text is not a media URN; ``kind`` is the URN layer's class name
    for the first fault (``EmptyError``, ``MediaUrnError``, ...) (PLAN-20)."""

    rule = "PLAN-20"


class InvalidInputError(PlannerError):
    """A depth or limit that is not a positive integer, or a cap the graph cannot hold (a cap
    taking data with no main input argument) (PLAN-21)."""

    rule = "PLAN-21"


class NotFoundError(PlannerError):
    """No plan leads from the source to the target within the depth asked (only
    :func:`~cartridge_runtime.planner.best_path` raises it; :func:`find_paths` answers an
    empty list) (PLAN-22)."""

    rule = "PLAN-22"


class KnitError(PlannerError):
    """A plan that was found but cannot be written as a machine: its first cap is a generator
    (``in=media:void``) that no argument of the strand's input feeds. ``kind`` is the machine
    layer's class name (``UnmatchedSourceInCapArgsError``) (PLAN-19)."""

    rule = "PLAN-19"
