"""CLI mode of a cartridge script: ``cartridges/interop.py`` run as a command-line tool.

Each test runs the script in a subprocess (as a user would) with a timeout, and checks stdout,
stderr and the exit status: 0 success, 1 handler error (one ``CODE (class): message`` line),
2 usage error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    FrameDecoder,
    FrameType,
    encode_frame,
    frames,
)
from cartridge_runtime.runtime._cli._mode import run_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cartridges" / "interop.py"
TIMEOUT = 30


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``interop.py ARGS`` with ``stdin`` piped in (empty pipe by default)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        check=False,
    )


def _load_interop() -> Any:
    spec = importlib.util.spec_from_file_location("interop_cartridge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTEROP = _load_interop()


def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run the CLI in-process (``run_cli`` with in-memory stdio): same behaviour, no
    interpreter start-up, so the many small cases stay fast."""
    out, err = io.BytesIO(), io.StringIO()
    status = run_cli(
        INTEROP.build_runtime(),
        list(args),
        stdin=io.BytesIO(stdin),
        stdout=out,
        stderr=err,
        prog="interop.py",
    )
    return subprocess.CompletedProcess(
        list(args), status, out.getvalue(), err.getvalue().encode("utf-8")
    )


def stderr_lines(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stderr.decode().splitlines()


def hello_manifest() -> bytes:
    """The manifest bytes the script sends in its HELLO (CBOR mode, raw host HELLO on stdin)."""
    host_hello = encode_frame(frames.hello(DEFAULT_LIMITS))
    result = subprocess.run(
        [sys.executable, str(SCRIPT)],
        input=host_hello,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    decoder = FrameDecoder(DEFAULT_LIMITS.max_frame)
    decoder.feed(result.stdout)
    decoder.feed(b"")
    frame = decoder.next_frame()
    assert frame is not None, result.stderr.decode()
    assert frame.frame_type == FrameType.HELLO
    manifest = frame.meta["manifest"]
    assert isinstance(manifest, bytes)
    return manifest


# -- manifest and help ----------------------------------------------------------------------


def test_manifest_equals_hello_manifest() -> None:
    result = run("manifest")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == json.loads(hello_manifest())
    # Indented with two spaces, as the reference prints it.
    assert result.stdout.decode().startswith('{\n  "name": "interop"')


def test_manifest_lists_every_interop_cap() -> None:
    manifest = json.loads(cli("manifest").stdout)
    aliases = [cap["aliases"][0] for group in manifest["cap_groups"] for cap in group["caps"]]
    assert aliases == [
        "identity",
        "echo",
        "double",
        "words",
        "progress",
        "fail",
        "generate",
        "sha256",
        "split",
        "peer-echo",
        "sleep",
        "concat",
        "file-info",
    ]
    for group in manifest["cap_groups"]:
        for cap in group["caps"][1:]:
            # The cap URN carries the first alias as a marker tag.
            assert cap["aliases"][0] in cap["urn"].removeprefix("cap:").split(";")


def test_manifest_validates() -> None:
    from cartridge_runtime.manifest import Manifest

    Manifest.from_json(cli("manifest").stdout, strict=True)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_caps_by_alias_with_arguments(flag: str) -> None:
    result = run(flag)
    assert result.returncode == 0
    assert result.stderr == b""
    text = result.stdout.decode()
    for alias in ("identity", "echo", "double", "words", "concat", "file-info"):
        assert f"\n  {alias} " in text
    assert "interop.py manifest" in text
    assert "concat (<input> | < stdin) --suffix <suffix>" in text
    assert "file-info (<file> | < stdin)" in text


def test_alias_help_shows_title_description_and_all_arguments() -> None:
    result = run("concat", "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    lines = text.splitlines()
    assert lines[0] == "Concat"
    assert lines[1] == "Returns the first input followed by the second."
    assert "input  (media:enc=utf-8, required)" in text
    assert "suffix  (media:enc=utf-8;suffix, required)" in text
    assert "--suffix <value> or --suffix=<value>" in text
    assert "standard input (as media:enc=utf-8)" in text
    assert 'cap:concat;in="media:enc=utf-8";out="media:enc=utf-8"' in text


def test_alias_help_names_outputs() -> None:
    text = cli("split", "-h").stdout.decode()
    assert "output  (media:enc=utf-8; main, printed to stdout)" in text
    assert "stats  (media:fmt=json;record; not printed)" in text


def test_version() -> None:
    result = cli("--version")
    assert (result.returncode, result.stdout) == (0, b"interop 0.1.0\n")


# -- running caps ---------------------------------------------------------------------------


def test_echo_via_stdin_is_byte_exact() -> None:
    data = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4, every byte value
    result = run("echo", stdin=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout == data
    assert result.stderr == b""


def test_echo_of_empty_stdin_is_a_missing_argument() -> None:
    result = cli("echo")
    assert result.returncode == 2
    assert "'echo' needs its argument 'input'" in result.stderr.decode()


def test_double_by_position() -> None:
    result = cli("double", '{"value": 21}')
    assert (result.returncode, result.stdout) == (0, b"42")


def test_double_by_stdin() -> None:
    result = cli("double", stdin=b'{"value": -4}\n')
    assert (result.returncode, result.stdout) == (0, b"-8")


def test_double_bad_json_is_a_handler_error() -> None:
    result = cli("double", "nope")
    assert result.returncode == 1
    lines = stderr_lines(result)
    assert len(lines) == 1
    assert lines[0].startswith("INVALID_INPUT (input): ")


def test_concat_by_flag_forms() -> None:
    assert cli("concat", "ab", "--suffix", "cd").stdout == b"abcd"
    assert cli("concat", "--suffix=cd", "ab").stdout == b"abcd"
    assert cli("concat", "--suffix", "cd", stdin=b"from-stdin ").stdout == b"from-stdin cd"


def test_words_one_per_line() -> None:
    result = run("words", stdin="alpha  beta\n\tgamma δέλτα\n".encode())
    assert result.returncode == 0
    assert result.stdout.decode() == "alpha\nbeta\ngamma\nδέλτα\n"  # noqa: RUF001


def test_progress_and_logs_go_to_stderr() -> None:
    result = cli("progress", '{"steps": 4}')
    assert (result.returncode, result.stdout) == (0, b"completed")
    lines = stderr_lines(result)
    assert lines[0] == "[PROGRESS 0%] step 1 of 4"
    assert "[PROGRESS 25%] step 2 of 4" in lines
    assert "[INFO internal] did step 4" in lines
    assert len(lines) == 8


def test_file_info_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    content = b"\x00\x01interop\xff" * 1000
    path.write_bytes(content)
    result = run("file-info", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
    }


def test_file_info_glob_runs_once_per_file(tmp_path: Path) -> None:
    for name, body in (("a.txt", b"a"), ("b.txt", b"bb")):
        (tmp_path / name).write_bytes(body)
    result = cli("file-info", str(tmp_path / "*.txt"))
    assert result.returncode == 0, result.stderr
    decoder = json.JSONDecoder()
    text, sizes = result.stdout.decode(), []
    while text:
        value, end = decoder.raw_decode(text)
        sizes.append(value["size"])
        text = text[end:]
    assert sizes == [1, 2]


def test_file_info_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = cli("file-info", str(tmp_path / "absent"))
    assert result.returncode == 2
    assert "file not found" in result.stderr.decode()


def test_split_prints_only_the_main_output() -> None:
    result = cli("split", "abc")
    assert (result.returncode, result.stdout) == (0, b"ABC")


def test_generate_streams_pattern() -> None:
    result = cli("generate", '{"size": 100003}')
    assert result.returncode == 0
    assert result.stdout == (b"ABCDEFGH" * 12501)[:100003]


def test_sha256_of_stdin() -> None:
    data = b"x" * 300_000
    result = cli("sha256", stdin=data)
    assert result.stdout.decode() == hashlib.sha256(data).hexdigest()


# -- errors ---------------------------------------------------------------------------------


def test_fail_is_one_stderr_line_and_exit_1() -> None:
    result = run("fail", "boom now")
    assert result.returncode == 1
    assert result.stdout == b""
    assert stderr_lines(result) == ["INTEROP_FAIL (input): asked to fail: boom now"]


def test_unknown_alias_lists_available_ones() -> None:
    result = run("nope")
    assert result.returncode == 2
    text = result.stderr.decode()
    assert "unknown command 'nope'" in text
    for alias in ("echo", "double", "file-info", "manifest"):
        assert alias in text
    assert "Traceback" not in text


def test_missing_required_arg_is_named() -> None:
    result = run("concat", "only-first")
    assert result.returncode == 2
    assert stderr_lines(result) == [
        "interop.py: 'concat' needs its argument 'suffix' (media:enc=utf-8;suffix); "
        "give it as --suffix <suffix>"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("concat", "a", "--bogus", "x"), "has no option '--bogus'"),
        (("concat", "a", "--suffix"), "option --suffix of 'concat' needs a value"),
        (("concat", "a", "--suffix", "b", "--suffix", "c"), "given more than once"),
        (("double", "1", "2"), "takes 1 positional argument(s); got 1 more (from position 1"),
        (("manifest", "extra"), "'manifest' takes no arguments"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert message in result.stderr.decode()


def test_peer_call_in_cli_mode_fails_cleanly() -> None:
    result = cli("peer-echo", stdin=b"x")
    assert result.returncode == 1
    lines = stderr_lines(result)
    assert len(lines) == 1
    assert lines[0].startswith("HANDLER_ERROR (internal): ")


# -- argument mapping on synthetic caps ---------------------------------------------------


def _cap_with(*args: Any) -> Any:
    from cartridge_runtime.manifest import CapDef

    return CapDef(urn="cap:probe", title="Probe", aliases=("probe",), args=args)


def _plan(cap: Any, *tokens: str, stdin: bytes = b"") -> list[list[Any]]:
    from cartridge_runtime.runtime._cli._args import StdinReader, plan_invocations

    return plan_invocations(cap, list(tokens), StdinReader(io.BytesIO(stdin)))


@pytest.mark.parametrize(
    ("default", "expected"),
    [
        (True, b"true"),
        (False, b"false"),
        ("text é", "text é".encode()),
        (2.5, b"2.5"),
        (7, b"7"),
        ([1, "a"], b'[1, "a"]'),
        ({"k": None}, b'{"k": null}'),
    ],
)
def test_default_values_become_typed_bytes(default: Any, expected: bytes) -> None:
    from cartridge_runtime.manifest import ArgDef

    cap = _cap_with(ArgDef.flag("media:opt", "--opt", name="opt", default_value=default))
    [[value]] = _plan(cap)
    assert (value.media_urn, value.data) == ("media:opt", expected)
    [[given]] = _plan(cap, "--opt", "x")
    assert given.data == b"x"


def test_optional_arg_without_value_is_left_out() -> None:
    from cartridge_runtime.manifest import ArgDef

    cap = _cap_with(ArgDef.flag("media:opt", "--opt", name="opt"))
    assert _plan(cap) == [[]]


def test_double_dash_ends_options() -> None:
    from cartridge_runtime.manifest import ArgDef

    cap = _cap_with(ArgDef.positional("media:p", 0, name="p"))
    [[value]] = _plan(cap, "--", "--looks-like-a-flag")
    assert value.data == b"--looks-like-a-flag"


def test_file_path_sequence_arg_reads_every_file(tmp_path: Path) -> None:
    from cartridge_runtime.manifest import ArgDef, PositionSource, StdinSource

    for name in ("x1.dat", "x2.dat"):
        (tmp_path / name).write_bytes(name.encode())
    arg = ArgDef(
        media_urn="media:enc=utf-8;file-path;list",
        name="files",
        sources=[PositionSource(index=0), StdinSource(media_urn="media:")],
        is_sequence=True,
    )
    [[value]] = _plan(_cap_with(arg), str(tmp_path / "x*.dat"))
    assert value.media_urn == "media:"  # relabelled with the stdin URN
    assert value.items == (b"x1.dat", b"x2.dat")


def test_file_path_value_from_stdin_is_content_not_a_path() -> None:
    [[value]] = _plan(INTEROP.MANIFEST.find_cap("file-info"), stdin=b"/not/a/path")
    assert value.media_urn == "media:"
    assert value.reader is not None
    assert value.reader.read_all() == b"/not/a/path"
