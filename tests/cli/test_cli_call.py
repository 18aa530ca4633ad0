"""``cartridge call`` as a user meets it: arguments as the manifest spells them, every output
reachable, atomic files, timeouts, policy, the cartridge's stderr, output discipline on
terminals and pipes, signals, and usage errors found before anything is spawned."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _engine_helpers import INTEROP, ROOT

CLI = [sys.executable, "-m", "cartridge_runtime.cli"]
FIXTURE = ROOT / "tests" / "fixtures" / "cli_cartridge.py"


def run(
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=env,
        cwd=cwd,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def lines(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    return proc.stderr.decode().splitlines()


# -- item 6: arguments and caps as the manifest declares them ---------------------------------


def test_declared_positional_and_flag() -> None:
    out = run("call", str(INTEROP), "concat", "hello", "--suffix", " world")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"hello world"


def test_flag_with_equals_and_cap_by_urn() -> None:
    urn = 'cap:concat;in="media:enc=utf-8";out="media:enc=utf-8"'
    out = run("call", str(INTEROP), urn, "ab", "--suffix=cd")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"abcd"


def test_arguments_by_name() -> None:
    out = run("call", str(INTEROP), "concat", "--arg", "input=ab", "--arg", "suffix=cd")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"abcd"


def test_named_and_declared_mix_with_stdin() -> None:
    out = run("call", str(INTEROP), "concat", "--suffix", "!", stdin=b"piped")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"piped!"


def test_file_path_positional_reads_the_file(tmp_path: Path) -> None:
    data = os.urandom(1234)
    (tmp_path / "blob.bin").write_bytes(data)
    out = run("call", str(INTEROP), "file-info", str(tmp_path / "blob.bin"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["size"] == len(data)


def test_missing_declared_argument_is_usage_error() -> None:
    out = run("call", str(INTEROP), "concat", "hello")
    assert out.returncode == 2
    assert "suffix" in out.stderr.decode()


def test_unknown_argument_name_is_usage_error() -> None:
    out = run("call", str(INTEROP), "concat", "--arg", "nosuch=1")
    assert out.returncode == 2
    err = out.stderr.decode()
    assert "'nosuch'" in err and "input" in err and "suffix" in err


def test_undeclared_option_is_usage_error() -> None:
    out = run("call", str(INTEROP), "concat", "a", "--suffix", "b", "--nope", "c")
    assert out.returncode == 2
    assert "--nope" in out.stderr.decode()


# -- item 7: every declared output, atomically -------------------------------------------------


def test_named_output_to_a_file(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    out = run("call", str(INTEROP), "split", "Hello", "--output", f"stats={stats}")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"HELLO"
    assert json.loads(stats.read_text()) == {"length": 5}


def test_output_dir_gets_every_output(tmp_path: Path) -> None:
    out = run("call", str(INTEROP), "split", "Hello", "--output-dir", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    assert out.stdout == b""
    assert (tmp_path / "out" / "output").read_bytes() == b"HELLO"
    assert json.loads((tmp_path / "out" / "stats").read_text()) == {"length": 5}


def test_unknown_output_name_is_usage_error(tmp_path: Path) -> None:
    out = run("call", str(INTEROP), "split", "Hello", "--output", f"nosuch={tmp_path / 'x'}")
    assert out.returncode == 2
    assert "stats" in out.stderr.decode()
    assert list(tmp_path.iterdir()) == []


def test_failed_call_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "result.bin"
    out = run("call", str(FIXTURE), "boom", "-o", str(target), stdin=b"x")
    assert out.returncode == 1
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary one


def test_failed_call_keeps_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "result.bin"
    target.write_bytes(b"previous")
    out = run("call", str(FIXTURE), "boom", "--output-dir", str(tmp_path), stdin=b"x")
    assert out.returncode == 1
    assert [p.name for p in tmp_path.iterdir()] == ["result.bin"]
    assert target.read_bytes() == b"previous"


# -- item 8: timeout, policy, the cartridge's stderr -------------------------------------------


def test_timeout_fails_the_call() -> None:
    out = run("call", str(FIXTURE), "hang", "--timeout", "0.5", stdin=b"x")
    assert out.returncode == 1
    assert lines(out)[-1].startswith("TIMEOUT (environment):")


def test_policy_default_offline_and_full() -> None:
    default = run("call", str(FIXTURE), "policy", stdin=b"x")
    assert default.returncode == 0, default.stderr
    assert default.stdout == b"offline"
    full = run("call", str(FIXTURE), "policy", "--policy", "full", stdin=b"x")
    assert full.returncode == 0, full.stderr
    assert full.stdout == b"full"
    assert run("call", str(FIXTURE), "policy", "--policy", "bogus", stdin=b"x").returncode == 2
    helptext = run("call", "--help", env={**os.environ, "COLUMNS": "200"}).stdout.decode()
    assert "Default: offline" in helptext


def test_handler_error_names_type_and_verbose_shows_stderr() -> None:
    quiet = run("call", str(FIXTURE), "boom", stdin=b"x")
    assert quiet.returncode == 1
    assert lines(quiet) == ["HANDLER_ERROR (internal): KeyError: 'x'"]
    loud = run("call", str(FIXTURE), "boom", "-v", stdin=b"x")
    assert loud.returncode == 1
    err = loud.stderr.decode()
    assert err.startswith("HANDLER_ERROR (internal): KeyError: 'x'\n")
    assert "boom: about to fail" in err and "Traceback" in err


def test_log_dir_keeps_the_stderr(tmp_path: Path) -> None:
    out = run("call", str(FIXTURE), "boom", "--log-dir", str(tmp_path / "logs"), stdin=b"x")
    assert out.returncode == 1
    logs = list((tmp_path / "logs").iterdir())
    assert len(logs) == 1 and "boom: about to fail" in logs[0].read_text()
    assert str(logs[0]) in out.stderr.decode()


# -- item 9: output discipline -----------------------------------------------------------------


def test_error_line_keeps_arg_urn() -> None:
    out = run("call", str(FIXTURE), "typed", stdin=b"x")
    assert out.returncode == 1
    assert lines(out) == [
        "BAD_TEXT (input): the text is not acceptable arg=media:enc=utf-8",
    ]


def test_end_message_is_shown() -> None:
    out = run("call", str(FIXTURE), "ended", stdin=b"hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"hi"
    assert "all done here" in out.stderr.decode()


def test_cartridge_died_is_one_line_once() -> None:
    out = run("call", str(FIXTURE), "die", stdin=b"x")
    assert out.returncode == 1
    (line,) = lines(out)
    assert line.startswith("CARTRIDGE_DIED (environment):") and "exit status 3" in line


def test_head_exits_quietly() -> None:
    cmd = " ".join(
        [
            *(f"'{c}'" for c in CLI),
            "call",
            f"'{INTEROP}'",
            "generate",
            """'{"size": 200000000}'""",
            "</dev/null | head -c 10; echo status=${PIPESTATUS[0]} >&2",
        ]
    )
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.stdout == b"ABCDEFGHAB"
    status = int(err.rsplit("status=", 1)[1])
    assert status in (0, 141)
    assert err.strip() == f"status={status}", err


def _on_terminal(*args: str) -> bytes:
    """Run the CLI with stdout and stderr on one pseudo-terminal; what the terminal got."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            block = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not block:
            break
        got += block
    proc.wait(timeout=60)
    os.close(master)
    return got.replace(b"\r\n", b"\n")


def test_scalar_output_on_a_terminal_ends_with_newline() -> None:
    assert _on_terminal("call", str(INTEROP), "concat", "ab", "--suffix", "cd") == b"abcd\n"


def test_progress_on_the_data_terminal_never_garbles_data() -> None:
    got = _on_terminal("call", str(INTEROP), "progress", '{"steps": 3}')
    text = got.decode()
    assert "completed" in text.splitlines()  # the data is a line of its own
    for line in text.splitlines():
        assert line.startswith("[") or line == "completed", line


def test_sigterm_stops_the_cartridge(tmp_path: Path) -> None:
    mark = tmp_path / "pids"
    env = {**os.environ, "CLI_CARTRIDGE_MARK": str(mark)}
    proc = subprocess.Popen(
        [*CLI, "call", str(FIXTURE), "hang"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(b"x")
    proc.stdin.close()
    deadline = time.monotonic() + 60
    while not (mark.exists() and mark.read_text().strip()):
        assert time.monotonic() < deadline, "the cartridge never started"
        time.sleep(0.05)
    child = int(mark.read_text().split()[0])
    time.sleep(0.5)  # let the call reach the handler
    proc.send_signal(signal.SIGTERM)
    status = proc.wait(timeout=30)
    assert status == 128 + signal.SIGTERM
    assert not Path(f"/proc/{child}").exists()  # killed and reaped before the CLI exited
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_help_texts_show_no_python_types() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    for command in ([], ["call"], ["manifest"], ["conform"], ["trace"], ["tee"], ["new"]):
        text = run(*command, "--help", env=env).stdout.decode()
        for word in ("<bool>", "<str>", "<list[", "<path>", "<float>", "{"):
            assert word not in text, (command, word)
    cli_mode = subprocess.run(
        [sys.executable, str(INTEROP), "concat", "--help"], capture_output=True, timeout=60
    ).stdout.decode()
    assert "position 0" in cli_mode and "positional argument 1" not in cli_mode


# -- item 10: usage errors before anything is spawned ------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["call", "no/such/cartridge.py", "echo"], "not found"),
        (["call", str(FIXTURE), "ended", "--arg", "media:enc=utf-8=@/no/such/file"], "not found"),
        (["call", str(FIXTURE), "ended", "--arg", "input=@/no/such/file"], "not found"),
        (["call", str(FIXTURE), "cap:in=x;;"], "invalid cap URN: "),
    ],
    ids=["cartridge", "file-by-urn", "file-by-name", "cap-urn"],
)
def test_usage_error_before_spawn(args: list[str], words: str, tmp_path: Path) -> None:
    mark = tmp_path / "pids"
    out = run(*args, env={**os.environ, "CLI_CARTRIDGE_MARK": str(mark)})
    assert out.returncode == 2
    (line,) = lines(out)
    assert words in line
    assert not mark.exists()  # the cartridge was never started


def test_malformed_cap_urn_gives_the_reason() -> None:
    out = run("call", str(FIXTURE), "cap:in=x;;")
    (line,) = lines(out)
    assert line.split("invalid cap URN: ", 1)[1]  # the URN error's own reason follows


def test_valid_cap_nobody_handles_lists_closest() -> None:
    cap = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";endd'
    out = run("call", str(FIXTURE), cap, stdin=b"x")
    assert out.returncode == 1
    (line,) = lines(out)
    assert line.startswith("NO_HANDLER (environment):")
    assert "closest:" in line and "ended" in line.split("closest:", 1)[1]


def test_renderer_keeps_status_lines_off_the_data_line(tmp_path: Path) -> None:
    """Unit level: on a terminal that shows the data, a status line never starts in the middle
    of a data line, and no bar is drawn; with the main output in a file a bar may be."""
    import io

    from cartridge_runtime.cli._call_outputs import Renderer, plan_outputs

    out, err = io.BytesIO(), io.StringIO()
    shown = Renderer(plan_outputs(None, [], None), out, err, out_tty=True, err_tty=True, label="x")
    shown.data(None, b"partial", item=False)
    shown.progress(0.5, "half")
    shown.data(None, b" rest", item=False)
    shown.finish()
    assert out.getvalue() == b"partial rest\n"  # the data itself is untouched
    assert err.getvalue() == "\n[PROGRESS 50%] half\n"  # starts on a fresh line
    to_file = Renderer(
        plan_outputs(None, [str(tmp_path / "f")], None),
        io.BytesIO(),
        io.StringIO(),
        out_tty=True,
        err_tty=True,
        label="x",
    )
    assert to_file._bar_wanted and not shown._bar_wanted
