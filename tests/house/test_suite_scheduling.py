"""``./scripts/test`` runs a file's tests on one worker (its module fixtures built once), the
Ray modules together, the longest files first (``tests/_xdist_files.py``)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _xdist_files import LONG_FILES, RAY_UNIT, longest, unit_of

pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[2]


def test_a_test_belongs_to_its_file_and_every_ray_module_to_one_unit() -> None:
    assert unit_of("tests/urn/test_urn_api.py::test_media[a-b]") == "tests/urn/test_urn_api.py"
    assert unit_of("tests/engine/test_engine_ray.py::test_x") == RAY_UNIT
    assert unit_of("tests/engine/test_ray_two_nodes.py::T::test_y") == RAY_UNIT
    assert unit_of("tests/ray_things/test_other.py::test_z") == "tests/ray_things/test_other.py"


def test_the_longest_unit_goes_first_and_ties_keep_their_order() -> None:
    listed = sorted(LONG_FILES, key=LONG_FILES.__getitem__)
    assert listed, "no long file listed"
    assert longest(["tests/a.py", *listed, "tests/b.py"]) == listed[-1]
    assert longest(["tests/a.py", "tests/b.py"]) == "tests/a.py"
    # A file renamed or removed is taken out of the table too.
    assert [u for u in LONG_FILES if u != RAY_UNIT and not (ROOT / u).is_file()] == []


def test_each_files_tests_run_on_one_worker(tmp_path: Path) -> None:
    log = tmp_path / "tests.tsv"
    files = ["tests/urn/test_urn_api.py", "tests/urn/test_urn_props.py"]
    env = {**os.environ, "CARTRIDGE_TEST_CPU_LOG": str(log)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider", *files],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = collections.defaultdict(set)
    for line in log.read_text().splitlines():
        nodeid, _self_cpu, _child_cpu, _wall, worker = line.split("\t")
        workers[nodeid.split("::")[0]].add(worker)
    assert sorted(workers) == files
    # Each file whole on one worker, and the two files on two workers.
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers
    assert len(set().union(*workers.values())) == 2, workers
