"""CLI mode as the reference runs it (capdag 1.524.58, measured on the fixture cartridge
written with it): help on stderr with nothing on stdout, a handler failure as a JSON line on
stderr, and a newline after each bytes or text emission on the main output (a raw write
unchanged). Each case runs the reference fixture and this runtime's interop cartridge alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = [sys.executable, str(ROOT / "tests" / "fixtures" / "capdag_cartridge.py")]
OURS = [sys.executable, str(ROOT / "cartridges" / "interop.py")]
TARGETS = {"reference": REFERENCE, "runtime": OURS}

#: Per target: (a cap alias, a failing cap alias, an alias whose handler emits one text value).
ALIASES = {
    "reference": ("ref-echo", "ref-fail", "ref-echo"),
    "runtime": ("concat", "fail", "sha256"),
}


def run(target: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*TARGETS[target], *args], input=stdin, capture_output=True, timeout=60, check=False
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_goes_to_stderr_and_exits_0(target: str, flag: str) -> None:
    result = run(target, flag)
    assert result.returncode == 0
    assert result.stdout == b""
    assert ALIASES[target][0] in result.stderr.decode()


@pytest.mark.parametrize("target", TARGETS)
def test_alias_help_goes_to_stderr_and_exits_0(target: str) -> None:
    result = run(target, ALIASES[target][0], "--help")
    assert result.returncode == 0
    assert result.stdout == b""
    assert result.stderr.strip()


@pytest.mark.parametrize("target", TARGETS)
def test_a_failing_handler_writes_a_json_line_on_stderr(target: str) -> None:
    result = run(target, ALIASES[target][1], stdin=b"boom")
    assert result.returncode != 0
    assert result.stdout == b""
    line = result.stderr.decode().splitlines()[0]
    report = json.loads(line)
    assert set(report) >= {"error", "code", "attribution_class"}
    assert isinstance(report["error"], str) and report["error"]


def test_this_runtime_writes_only_the_json_line() -> None:
    result = run("runtime", "fail", "boom now")
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert json.loads(line) == {
        "error": "asked to fail: boom now",
        "code": "INTEROP_FAIL",
        "attribution_class": "input",
    }


@pytest.mark.parametrize("target", TARGETS)
def test_a_text_emission_ends_with_a_newline(target: str) -> None:
    result = run(target, ALIASES[target][2], stdin=b"abc")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(b"\n") and result.stdout.count(b"\n") == 1


def test_a_raw_write_is_unchanged() -> None:
    data = b"no newline added"
    assert run("reference", "ref-raw", stdin=data).stdout.endswith(data)
    assert run("runtime", "echo", stdin=data).stdout == data


LOGGER = """
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime

CAP = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";noted'
runtime = CartridgeRuntime(
    Manifest.build(name="noted", version="1.0.0", description="logs",
                   caps=[CapDef.simple(CAP, "Noted", aliases="noted")])
)

@runtime.op(CAP)
async def noted(req):
    text = await req.take_input().require_stream_str("media:enc=utf-8")
    await req.log("warn", "odd input", "input", arg_urn="media:enc=utf-8")
    await req.output().emit_text(text)

if __name__ == "__main__":
    runtime.run()
"""


def test_a_log_naming_an_argument_puts_it_inside_the_brackets(tmp_path: Path) -> None:
    script = tmp_path / "noted.py"
    script.write_text(LOGGER)
    result = subprocess.run(
        [sys.executable, str(script), "noted"],
        input=b"x",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines() == ["[WARN input arg=media:enc=utf-8] odd input"]
    assert result.stdout == b"x\n"
