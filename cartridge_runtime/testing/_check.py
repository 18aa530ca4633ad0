"""``check_cartridge``: the conformance kit as one assertion, for any test runner."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..conformance import DEFAULT_TIMEOUT, Level, Report, Status, run_conformance

__all__ = ("check_cartridge",)


def check_cartridge(
    target: str | os.PathLike[str] | Sequence[str],
    *,
    only: Iterable[str] | None = None,
    expected_failures: Iterable[str] = (),
    strict: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> Report:
    """Run the conformance catalogue on ``target`` and fail loudly when it is not conformant.

    ``target`` is a ``.py`` script, an executable or an argv. Every failed MUST check (and,
    with ``strict``, every failed SHOULD check) raises, except the ids in
    ``expected_failures`` (for a target with known defects); an expected failure that
    passes raises too, so the list cannot go stale. Returns the report otherwise.

    :raises AssertionError: listing each unexpected failure as ``ID title: detail``.
    """
    report = run_conformance(target, only=only, timeout=timeout)
    expected = {e.strip().upper() for e in expected_failures}
    problems = []
    for r in report.results:
        counts = r.level is Level.MUST or strict
        if r.status is Status.FAIL and counts and r.id not in expected:
            problems.append(f"{r.id} [{r.level}] {r.title}: {r.detail}")
        elif r.id in expected and r.status is not Status.FAIL:
            problems.append(f"{r.id} was expected to fail but {r.status}: {r.detail}")
    if problems:
        raise AssertionError(
            f"{report.target}: {len(problems)} conformance problem(s) ({report.summary()}):\n  "
            + "\n  ".join(problems)
        )
    return report
