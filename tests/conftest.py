"""Shared set-up of the whole suite: the folders mirror the package (``tests/engine/`` for
``cartridge_runtime/engine/``...), ``tests/house/`` holds the structure, vocabulary, typing,
README and packaging checks, and the helper modules (``_engine_helpers.py``, vector readers,
generators) live here at the top, importable from every folder (this file's folder is on
``sys.path``)."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Property tests keep their examples; no deadline per example and no "too slow" health check:
# on a loaded machine (several workers on 2 cores) either fails a correct test, and a missed
# deadline makes Hypothesis run the example again to confirm it. A test's own @settings wins.
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], parent=settings.default
)
settings.load_profile("suite")

try:  # ``--dist loadgroup`` runs a file's tests on one worker, the longest files first
    from _xdist_files import pytest_xdist_make_scheduler
except ImportError:  # no pytest-xdist: every run is serial
    pass
else:
    __all__ = ("pytest_xdist_make_scheduler",)


_CPU_LOG = os.environ.get("CARTRIDGE_TEST_CPU_LOG")


if _CPU_LOG:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        """With ``CARTRIDGE_TEST_CPU_LOG=FILE``, append a line per test to FILE: its id, CPU
        seconds of this process and of the child processes it waited for, wall seconds and the
        xdist worker. The cost per file and per fixture on a shared host, where wall times are
        inflated by others' load (a module fixture's cost lands on its first test). A pytest
        the tests start themselves logs nothing: the variable stays with this process."""
        os.environ.pop("CARTRIDGE_TEST_CPU_LOG", None)
        before = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        start = time.perf_counter()
        yield
        wall = time.perf_counter() - start
        own, children = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        cpu_self = own.ru_utime + own.ru_stime - before[0].ru_utime - before[0].ru_stime
        cpu_kids = children.ru_utime + children.ru_stime - before[1].ru_utime - before[1].ru_stime
        with open(_CPU_LOG, "a", encoding="utf-8") as log:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
            log.write(f"{item.nodeid}\t{cpu_self:.3f}\t{cpu_kids:.3f}\t{wall:.3f}\t{worker}\n")
