"""``cartridge call`` as a first user met it: any cap URN that dispatches to one cap takes the
same inputs as its alias, path mistakes are usage errors, a failed start names its reason,
optional outputs that did not fire are named, ``--json`` shows every output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _engine_helpers import INTEROP

CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


# -- any cap URN that dispatches to one cap ----------------------------------------------------


@pytest.mark.parametrize(
    "cap",
    [
        "cap:concat",  # partial
        'cap:in="media:enc=utf-8";concat',  # partial, its tags in another order
        'cap:out="media:enc=utf-8";concat;in="media:enc=utf-8"',  # whole, reordered
    ],
)
def test_a_dispatching_cap_urn_takes_stdin_and_named_args(cap: str) -> None:
    by_name = run("call", str(INTEROP), cap, "--arg", "suffix=cd", stdin=b"ab")
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == b"abcd"
    by_flag = run("call", str(INTEROP), cap, "--suffix", "!", stdin=b"ab")
    assert by_flag.returncode == 0, by_flag.stderr
    assert by_flag.stdout == b"ab!"
