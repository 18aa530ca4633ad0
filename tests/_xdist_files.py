"""How ``./scripts/test`` spreads the suite over its pytest-xdist workers: a file at a time,
the longest files first.

A file's tests stay on one worker, so its module-scoped fixtures (a conformance run per
defect, a Ray instance, a compiled sample...) are built once. Every module whose name says
``ray`` shares one unit, so no two local Ray instances run at once (a second ``ray.init()``
on the machine would join the first). The unit handed to a worker that asks for work is the
longest one left (:data:`LONG_FILES`, then collection order): a long file started last would
keep one worker busy after the others ran out of work.

The units are computed here from the test ids, on the controller, instead of xdist's
``xdist_group`` marks: those travel by rewriting each test's id, which pytest 9 ignores, so
with them every test would be scheduled on its own and a module's fixtures built on every
worker that ran one of its tests.
"""

from __future__ import annotations

from typing import Final

from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

#: The unit of every module that starts a local Ray instance.
RAY_UNIT: Final = "ray"

#: Units that take longest: CPU seconds (the worker's and the processes it started) measured
#: on the development machine, 2 cores, with ``CARTRIDGE_TEST_CPU_LOG`` (see
#: ``tests/conftest.py``). Only the order matters; a unit not listed counts as 0.
LONG_FILES: Final[dict[str, float]] = {}


def unit_of(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: its file, or :data:`RAY_UNIT`."""
    path = nodeid.split("::", 1)[0]
    return RAY_UNIT if RAY_UNIT in path.rsplit("/", 1)[-1] else path


class FileScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a file (or the Ray modules together) as the scope, and
    the longest unit left handed out first."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        longest = max(self.workqueue, key=lambda unit: LONG_FILES.get(unit, 0.0))
        self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)
