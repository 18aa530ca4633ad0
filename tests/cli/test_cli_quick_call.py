"""A plain ``cartridge call TARGET CAP`` runs without typer and without the engine's machine,
planner, discovery, graph and relay packages, and answers as the typer command does: the same
bytes on stdout and stderr, the same exit status; anything else goes to typer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.cli._call_run import quick_call

INTEROP = str(Path(__file__).resolve().parents[2] / "cartridges" / "interop.py")
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]

#: What a plain call never imports.
HEAVY = (
    "typer",
    "click",
    "rich",
    "cartridge_runtime.cli.call",
    "cartridge_runtime.machine",
    "cartridge_runtime.planner",
    "cartridge_runtime.discovery",
    "cartridge_runtime.graph",
    "cartridge_runtime.relay",
)


def _cli(*args: str, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    done = subprocess.run([*CLI, "call", *args], input=stdin, capture_output=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_a_plain_call_imports_no_command_line_framework_nor_the_heavy_packages() -> None:
    probe = textwrap.dedent(
        f"""
        import sys
        sys.argv = ["cartridge", "call", {INTEROP!r}, "echo"]
        from cartridge_runtime.cli import main
        try:
            main()
        except SystemExit as exc:
            sys.stderr.write(f"status {{exc.code}}\\n")
        sys.stderr.write("\\n".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], input=b"ping", capture_output=True, timeout=120
    )
    assert done.stdout == b"ping"
    lines = done.stderr.decode().splitlines()
    assert lines[0] == "status 0", done.stderr
    loaded = set(lines[1:])
    assert "cartridge_runtime.cli._call_run" in loaded
    assert "cartridge_runtime.engine._engine" in loaded
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


@pytest.mark.parametrize(
    ("args", "status"),
    [
        ([INTEROP, "echo"], 0),
        ([INTEROP, "cap:echo"], 0),
        ([INTEROP, "nosuch"], 2),  # unknown alias, found before the call
        ([INTEROP, "fail"], 1),  # a call error
        (["/no/such/cartridge.py", "echo"], 2),  # found before anything is spawned
    ],
)
def test_a_plain_call_answers_as_the_typer_command_does(args: list[str], status: int) -> None:
    quick = _cli(*args, stdin=b"some bytes")
    # "--policy offline" is the default: the same call, parsed by typer.
    typed = _cli(*args, "--policy", "offline", stdin=b"some bytes")
    assert quick[0] == status, quick
    assert quick == typed
    assert b"Traceback" not in quick[2]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["x.py"],
        ["x.py", "echo", "extra"],
        ["x.py", "echo", "--json"],
        ["--json", "x.py", "echo"],
        ["x.py", "-h"],
        ["x.py", ""],
        ["-", "echo"],
    ],
)
def test_anything_but_target_and_cap_goes_to_typer(args: list[str]) -> None:
    assert quick_call(args) is None


def test_a_usage_error_is_typer_s_own() -> None:
    status, out, err = _cli(INTEROP)
    assert (status, out) == (2, b"")
    assert b"Missing argument 'CAP'" in err and b"Traceback" not in err


@pytest.mark.parametrize("cap", ["echo", "nosuch"])
def test_the_collector_is_on_again_after_a_plain_call(cap: str) -> None:
    # A plain call holds collections off while it starts; whatever the outcome, they resume.
    probe = textwrap.dedent(
        f"""
        import gc, sys
        sys.argv = ["cartridge", "call", {INTEROP!r}, {cap!r}]
        from cartridge_runtime.cli import main
        try:
            main()
        except SystemExit:
            pass
        sys.stderr.write(f"collecting {{gc.isenabled()}}")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], input=b"ping", capture_output=True, timeout=120
    )
    assert done.stderr.decode().endswith("collecting True"), done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_GETPIPE_SZ is Linux's")
def test_a_call_enlarges_the_pipe_its_output_goes_to() -> None:
    import fcntl

    read_end, write_end = os.pipe()
    try:
        done = subprocess.run(
            [*CLI, "call", INTEROP, "echo"], input=b"ping", stdout=write_end, timeout=120
        )
        os.close(write_end)
        write_end = -1
        assert done.returncode == 0
        assert os.read(read_end, 16) == b"ping"
        wanted = min(1 << 20, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
        assert fcntl.fcntl(read_end, getattr(fcntl, "F_GETPIPE_SZ", 1032)) >= wanted
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
