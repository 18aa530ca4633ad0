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

from collections.abc import Iterable
from typing import Any, Final

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

#: The unit of every module that starts a local Ray instance.
RAY_UNIT: Final = "ray"

#: The units that take longest: seconds on one worker, summed from ``CARTRIDGE_TEST_CPU_LOG``
#: (see ``tests/conftest.py``) in a 3-worker run on the development machine (2 cores, busy).
#: Only the order matters; a unit not listed counts as 0.
LONG_FILES: Final[dict[str, float]] = {
    RAY_UNIT: 207,
    "tests/machine/test_machine_run.py": 137,
    "tests/house/test_readme.py": 114,
    "tests/cli/test_cli_runs.py": 84,
    "tests/cli/test_cli_plan_choices.py": 75,
    "tests/cli/test_cli_explains.py": 75,
    "tests/cartridges/test_handler_guide.py": 74,
    "tests/cli/test_cli_call.py": 73,
    "tests/cli/test_cli_plan.py": 61,
    "tests/cli/test_engine_cli.py": 58,
    "tests/cli/test_cli_run.py": 52,
    "tests/machine/test_machine_cache.py": 49,
    "tests/relay/test_relay_capdag_host.py": 44,
    "tests/cli/test_cli_contact_call.py": 39,
    "tests/machine/test_machine_props.py": 38,
    "tests/cli/test_cli_machine.py": 37,
    "tests/runtime/test_bounded_memory.py": 37,
    "tests/protocol/test_codec_speedups.py": 34,
    "tests/conformance/test_conformance_defects.py": 34,
    "tests/engine/test_engine_interop.py": 33,
    "tests/cli/test_cli_startup.py": 32,
    "tests/planner/test_planner_props.py": 30,
    "tests/machine/test_machine_interop.py": 29,
    "tests/cli/test_cli_contact_run.py": 29,
}


def longest(units: Iterable[str]) -> str:
    """The unit to hand out next: the longest in :data:`LONG_FILES`, the first on a tie."""
    return max(units, key=lambda unit: LONG_FILES.get(unit, 0.0))


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
        self.workqueue.move_to_end(longest(self.workqueue), last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (what ``./scripts/test`` runs) schedules with
    :class:`FileScheduling`; any other mode is xdist's own. ``tests/conftest.py`` registers this
    hook (``-p _xdist_files`` does elsewhere)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return FileScheduling(config, log)
