"""How the engine turns a cartridge entry into a command (HST-1): ``.py`` with the engine's
own Python, ``.js`` with ``node``, a bare name found in the current folder as ``./name``
rather than a program of that name on PATH."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from _engine_helpers import RAW

from cartridge_runtime.engine import CartridgeNotFound, Engine
from cartridge_runtime.engine._placements._command import command_for

BYTES = "media:bytes"


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_python_entry_runs_with_the_engines_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("")
    assert command_for(str(script)) == [sys.executable, str(script)]


def test_a_js_entry_runs_with_node(tmp_path: Path) -> None:
    script = tmp_path / "x.js"
    script.write_text("")
    assert command_for(str(script)) == ["node", str(script)]
    assert command_for(script) == ["node", str(script)]


def test_a_missing_js_entry_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(CartridgeNotFound):
        command_for(str(tmp_path / "absent.js"))


def test_a_bare_name_in_the_current_folder_wins_over_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert shutil.which("ls") is not None
    _executable(tmp_path / "ls")
    monkeypatch.chdir(tmp_path)
    assert command_for("ls") == [os.path.join(os.curdir, "ls")]


def test_a_bare_name_not_in_the_folder_is_looked_up_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert command_for("ls") == ["ls"]


def test_a_command_list_whose_program_is_only_in_the_folder_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _executable(tmp_path / "only-here-cartridge")
    monkeypatch.chdir(tmp_path)
    assert command_for(["only-here-cartridge", "--x"]) == [
        os.path.join(os.curdir, "only-here-cartridge"),
        "--x",
    ]
    # a program on PATH named in a command list keeps the usual lookup
    assert command_for(["sh", "b"]) == ["sh", "b"]


@pytest.mark.asyncio
async def test_a_bare_name_in_the_current_folder_is_the_cartridge_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cartridge named like a program on PATH ("env"): the one in the folder must run
    assert shutil.which("env") is not None
    _executable(tmp_path / "env", f"#!/bin/sh\nexec {sys.executable} {RAW}\n")
    monkeypatch.chdir(tmp_path)
    async with Engine() as e:
        e.add_cartridge("env", known_caps=["cap:echo"])
        assert (await e.call_bytes("cap:echo", [(BYTES, b"here")])).data == b"here"


_NODE_SHIM = """
const { spawn } = require("child_process");
const child = spawn(process.env.SHIM_PYTHON, [process.env.SHIM_SCRIPT], { stdio: "inherit" });
child.on("exit", (code) => process.exit(code === null ? 1 : code));
"""


@pytest.mark.asyncio
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_a_js_cartridge_runs_under_node(tmp_path: Path) -> None:
    # the .js entry hands its stdio to the raw Python cartridge: a call through it proves
    # the engine started it with node (executed directly, a .js file is not a program)
    shim = tmp_path / "shim.js"
    shim.write_text(_NODE_SHIM)
    env = dict(os.environ, SHIM_PYTHON=sys.executable, SHIM_SCRIPT=str(RAW))
    async with Engine() as e:
        e.add_cartridge(str(shim), known_caps=["cap:echo"], env=env)
        assert (await e.call_bytes("cap:echo", [(BYTES, b"via node")])).data == b"via node"
