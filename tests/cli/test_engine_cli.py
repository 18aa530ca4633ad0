"""``cartridge call`` and ``cartridge manifest`` through a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _engine_helpers import INTEROP, RAW, raw_env

CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def run(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=env,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def test_call_echo_from_piped_stdin() -> None:
    out = run("call", str(INTEROP), "echo", stdin=b"piped bytes\x00\xff")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"piped bytes\x00\xff"


def test_call_sequence_items_one_per_line() -> None:
    out = run("call", str(INTEROP), "words", "--arg", "media:enc=utf-8=alpha beta gamma")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"alpha\nbeta\ngamma\n"


def test_call_two_args_and_full_urn() -> None:
    urn = 'cap:concat;in="media:enc=utf-8";out="media:enc=utf-8"'
    out = run(
        "call",
        str(INTEROP),
        urn,
        "--arg",
        "media:enc=utf-8=ab",
        "--arg",
        "media:enc=utf-8;suffix=cd",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"abcd"


def test_call_file_arg_and_output_file(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(500_000))
    dest = tmp_path / "out.bin"
    out = run("call", str(INTEROP), "echo", "--arg", f"media:=@{src}", "-o", str(dest))
    assert out.returncode == 0, out.stderr
    assert dest.read_bytes() == src.read_bytes()
    assert out.stdout == b""


def test_call_error_is_one_line_and_exit_1() -> None:
    out = run("call", str(INTEROP), "fail", "--arg", "media:enc=utf-8=boom")
    assert out.returncode == 1
    assert (
        out.stderr.decode().strip().splitlines()[-1] == "INTEROP_FAIL (input): asked to fail: boom"
    )


def test_call_progress_plain_lines_when_not_a_tty() -> None:
    out = run("call", str(INTEROP), "progress", "--arg", 'media:fmt=json;record={"steps": 2}')
    assert out.returncode == 0, out.stderr
    err = out.stderr.decode()
    assert "[PROGRESS 0%] step 1 of 2" in err and "[PROGRESS 50%] step 2 of 2" in err
    assert "[INFO internal] did step 1" in err
    assert out.stdout == b"completed"


def test_unknown_alias_lists_available_and_exit_2() -> None:
    out = run("call", str(INTEROP), "no-such-alias")
    assert out.returncode == 2
    err = out.stderr.decode()
    assert "no-such-alias" in err and "echo" in err and "words" in err


def test_usage_error_exit_2() -> None:
    assert run("call", str(INTEROP)).returncode == 2


def test_peer_call_across_cartridges() -> None:
    # peer-echo (interop) calls cap:echo; --cartridge loads the raw fixture too, but the
    # interop cartridge (the target) wins the cap:echo tie because it was added first.
    out = run("call", str(INTEROP), "peer-echo", "--cartridge", str(RAW), stdin=b"through a peer")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"through a peer"


def test_spawn_failure_exit_1() -> None:
    out = run("call", str(RAW), "echo", env=raw_env("crash"))
    assert out.returncode == 1
    err = out.stderr.decode()
    assert err.startswith("SPAWN_FAILED (environment):")
    assert "crashing on purpose" in err


def test_manifest_json_and_tree() -> None:
    out = run("manifest", str(INTEROP), "--json")
    assert out.returncode == 0, out.stderr
    manifest = json.loads(out.stdout)
    assert manifest["name"] == "interop"
    tree = run("manifest", str(INTEROP))
    assert tree.returncode == 0
    assert b"peer-echo" in tree.stdout and b"cap:echo" in tree.stdout


def test_manifest_bad_rule_exit_1() -> None:
    out = run("manifest", str(RAW), env=raw_env("badrule"))
    assert out.returncode == 1
    assert b"RULE3" in out.stderr


@pytest.mark.interop
def test_call_reference_cartridge() -> None:
    from _engine_helpers import REFERENCE

    out = run("call", str(REFERENCE), "ref-words", stdin=b"x y")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"x\ny\n"
