"""``./scripts/test`` runs a file's tests on one worker (its module fixtures built once), the
Ray modules together, the longest files first (``tests/_xdist_files.py``)."""

from __future__ import annotations

import collections
import os
import re
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


def test_each_files_tests_run_on_one_worker(tmp_path: Path) -> None:
    # Four files of four tests, two of them Ray modules by name, on two workers: what
    # xdist does with the scheduler of _xdist_files (loaded as a plugin, without the suite's
    # conftest, so the run stays small).
    files = ["test_a.py", "test_b.py", "test_engine_ray_one.py", "test_ray_two.py"]
    for name in files:
        (tmp_path / name).write_text("".join(f"def test_{i}():\n    pass\n\n" for i in range(4)))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_xdist_files", "-n", "2", "--dist", "loadgroup",
         "-v", "-p", "no:cacheprovider", "-p", "no:randomly", *files],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = collections.defaultdict(set)
    for match in re.finditer(r"^\[(gw\d+)\] .*?PASSED (\S+?)::", done.stdout, re.M):
        workers[match.group(2)].add(match.group(1))
    assert sorted(workers) == sorted(files), done.stdout
    # Each file whole on one worker, both Ray modules on the same one, and both workers used.
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers
    assert workers["test_engine_ray_one.py"] == workers["test_ray_two.py"], workers
    assert len(set().union(*workers.values())) == 2, workers
