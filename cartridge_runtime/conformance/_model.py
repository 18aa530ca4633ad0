"""The catalogue's vocabulary: checks, outcomes, results and the registry.

A check is a plain function of a :class:`CheckContext`. It returns a one-line detail on
success, or raises :class:`CheckFailed` / :class:`CheckSkipped` (in ``_outcomes``). Each check's id is a rule
id of ``protocol_spec/rules.json`` (the rule it certifies first); ``rules`` lists every rule
it touches, ``ck`` the row of ``protocol_spec/11-conformance.md`` it implements.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ._context import CheckContext

__all__ = (
    "CATALOGUE",
    "Check",
    "CheckResult",
    "Level",
    "Status",
    "check",
)


class Level(enum.StrEnum):
    """How binding the rule behind a check is."""

    MUST = "MUST"
    SHOULD = "SHOULD"


class Status(enum.StrEnum):
    """A check's verdict."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@attrs.frozen(kw_only=True)
class Check:
    """One numbered check of the catalogue."""

    id: str
    title: str
    level: Level
    func: Callable[[CheckContext], str]
    rules: tuple[str, ...] = ()
    ck: str = ""
    audit: bool = False  #: judged from the frame audit of every session of the run
    #: Processes of its own the check starts (a scheduling hint: such checks start early,
    #: interleaved with the cheap ones, so that process start-up overlaps the rest).
    procs: int = 0


@attrs.frozen(kw_only=True)
class CheckResult:
    """The verdict of one check on one target."""

    id: str
    title: str
    level: Level
    status: Status
    detail: str
    duration: float = 0.0
    known_defect: str | None = None

    @property
    def failed_must(self) -> bool:
        """A failed MUST check: the target is not conformant."""
        return self.status is Status.FAIL and self.level is Level.MUST

    def to_json(self) -> dict[str, object]:
        """The JSON report entry."""
        out: dict[str, object] = {
            "id": self.id,
            "title": self.title,
            "level": str(self.level),
            "result": str(self.status),
            "detail": self.detail,
            "duration": round(self.duration, 3),
        }
        if self.known_defect:
            out["known_defect"] = self.known_defect
        return out


#: The catalogue, in report order (filled by the ``_checks_*`` modules through ``@check``).
CATALOGUE: list[Check] = []


def check(
    id: str,
    title: str,
    level: str = "MUST",
    *,
    rules: tuple[str, ...] = (),
    ck: str = "",
    audit: bool = False,
    procs: int = 0,
) -> Callable[[Callable[[CheckContext], str]], Callable[[CheckContext], str]]:
    """Register a check function in :data:`CATALOGUE` (decorator)."""

    def register(func: Callable[[CheckContext], str]) -> Callable[[CheckContext], str]:
        if any(c.id == id for c in CATALOGUE):
            raise ValueError(f"duplicate check id {id}")
        CATALOGUE.append(
            Check(
                id=id,
                title=title,
                level=Level(level),
                func=func,
                rules=rules or (id,),
                ck=ck,
                audit=audit,
                procs=procs,
            )
        )
        return func

    return register
