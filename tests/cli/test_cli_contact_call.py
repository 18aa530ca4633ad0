"""``cartridge call`` as a first user met it: any cap URN that dispatches to one cap takes the
same inputs as its alias, path mistakes are usage errors, a failed start names its reason,
optional outputs that did not fire are named, ``--json`` shows every output."""

from __future__ import annotations

import json
import os
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


# -- path mistakes are usage errors, found before anything is spawned ------------------------


def _marking_cartridge(tmp_path: Path) -> tuple[Path, Path]:
    mark = tmp_path / "spawned"
    script = tmp_path / "marking.py"
    script.write_text(f"open({str(mark)!r}, 'w').close()\n")
    return script, mark


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--output-dir", "{file}"], "is not a directory"),
        (["-o", "{file}/out.bin"], "is not a directory"),
        (["-o", "{dir}"], "is a directory"),
        (["-o", "main={file}/out.bin"], "is not a directory"),
    ],
)
def test_an_output_path_mistake_is_a_usage_error(
    tmp_path: Path, options: list[str], words: str
) -> None:
    script, mark = _marking_cartridge(tmp_path)
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    given = [o.format(file=tmp_path / "file", dir=tmp_path / "dir") for o in options]
    done = run("call", str(script), "echo", *given, "--arg", "media:=x")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("error: ") and words in line
    assert not mark.exists()


def test_a_directory_given_as_the_cartridge_says_so(tmp_path: Path) -> None:
    done = run("call", str(tmp_path), "echo")
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("error: ") and "is a directory" in line and "not found" not in line


# -- a failed start names its reason; one class for TIMEOUT ------------------------------------


def _failing_cartridge(tmp_path: Path) -> Path:
    script = tmp_path / "failing.py"
    script.write_text(
        "import sys\nsys.stderr.write('loading settings\\n')\n"
        "raise SystemExit('settings file missing: /etc/failing.toml')\n"
    )
    return script


def test_a_failed_start_names_the_reason_in_the_error_line(tmp_path: Path) -> None:
    done = run("call", str(_failing_cartridge(tmp_path)), "echo")
    assert done.returncode == 1
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("SPAWN_FAILED (environment):")
    assert line.endswith("(stderr: settings file missing: /etc/failing.toml)")


def test_a_failed_start_in_run_and_machine_check_names_the_reason(tmp_path: Path) -> None:
    script = _failing_cartridge(tmp_path)
    machine = tmp_path / "m.machine"
    machine.write_text("e cap:in=media:;op=echo;out=media:\ndoc -> e -> out\n")
    for args in (["run", str(machine), "-c", str(script), "-i", "doc=x"],
                 ["machine", "check", str(machine), "-c", str(script)]):  # fmt: skip
        done = run(*args)
        assert done.returncode != 0
        assert "settings file missing: /etc/failing.toml" in done.stderr.decode().splitlines()[-1]


# -- optional outputs that did not fire; --json --------------------------------------------------

_TAGGER = """
from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, Request

TEXT = "media:enc=utf-8"
NOTE = "media:enc=utf-8;note"
CAP = 'cap:in="media:enc=utf-8";op=tag;out="media:enc=utf-8"'
runtime = CartridgeRuntime(Manifest.build(name="tagger", version="1.0.0", description="tags",
    caps=[CapDef(urn=CAP, title="Tag", aliases=("tag",), args=[ArgDef.stdin(TEXT)],
        outputs=[OutputDef(media_urn=TEXT, name="words", output_description="words",
                           is_sequence=True),
                 OutputDef(media_urn=NOTE, name="note", output_description="a note",
                           optional=True)])]))

@runtime.op(CAP)
async def tag(req: Request) -> None:
    text = await req.take_input().require_stream_str(TEXT)
    out = req.output()
    for n, word in enumerate(text.split()):
        await out.emit_list_item(word, {"n": n})

if __name__ == "__main__":
    runtime.run()
"""


def test_an_optional_output_that_did_not_fire_is_named(tmp_path: Path) -> None:
    script = tmp_path / "tagger.py"
    script.write_text(_TAGGER)
    done = run("call", str(script), "tag", stdin=b"a b")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"a\nb\n"
    assert "output note: absent (optional, it did not fire)" in done.stderr.decode()


def test_json_prints_every_output_with_items_and_their_meta(tmp_path: Path) -> None:
    script = tmp_path / "tagger.py"
    script.write_text(_TAGGER)
    done = run("call", str(script), "tag", "--json", stdin=b"a b")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["absent"] == ["note"]
    words = report["outputs"]["words"]
    assert words["is_sequence"] is True
    assert words["items"] == [{"value": "a", "meta": {"n": 0}}, {"value": "b", "meta": {"n": 1}}]


def test_json_reports_a_failure_too() -> None:
    done = run("call", str(INTEROP), "sleep", "--json", "--arg", "media:=x", "--timeout", "30")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["code"]


# -- stdin and stdout at the engine's pace ---------------------------------------------------------


def test_a_large_piped_stdin_arrives_whole_and_in_order() -> None:
    data = os.urandom(3 << 20) + b"end"
    done = run("call", str(INTEROP), "echo", stdin=data)  # subprocess feeds it through a pipe
    assert done.returncode == 0, done.stderr
    assert done.stdout == data


def test_a_regular_file_on_stdin_arrives_whole(tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"end"
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    with source.open("rb") as stdin:
        done = subprocess.run([*CLI, "call", str(INTEROP), "echo"], stdin=stdin,
                              capture_output=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == data


def test_json_with_an_output_file_is_a_usage_error(tmp_path: Path) -> None:
    done = run("call", str(INTEROP), "echo", "--json", "-o", str(tmp_path / "x"))
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("error: --json") and not (tmp_path / "x").exists()
