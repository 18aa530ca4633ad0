"""Every command and code sample in the README runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

#: Commands that a test runs elsewhere, or that would recurse.
NOT_HERE = {
    "./scripts/test": "it is the command running this test",
}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _commands() -> list[str]:
    out = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd and cmd not in NOT_HERE:
                out.append(cmd)
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("CI", None)
    return env


def test_readme_lists_the_two_commands() -> None:
    assert "./scripts/demo" in README and "./scripts/test" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci


def test_example_cartridge_in_readme_is_the_file() -> None:
    example = (ROOT / "examples" / "shout.py").read_text()
    (block,) = [b for b in _blocks("python") if "class Shout(Op)" in b]
    assert block.strip() in example


@pytest.mark.parametrize("command", _commands())
def test_readme_command_runs(command: str, tmp_path: Path) -> None:
    command = command.replace("/tmp/", f"{tmp_path}/")
    proc = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=_env(), capture_output=True, timeout=180
    )
    assert proc.returncode == 0, (
        f"{command!r} exited {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
        f"stderr: {proc.stderr[-2000:]!r}"
    )


def test_readme_harness_and_engine_samples_run(tmp_path: Path) -> None:
    harness = next(b for b in _blocks("python") if "CartridgeHarness" in b)
    engine = next(b for b in _blocks("python") if "async with Engine()" in b)
    script = tmp_path / "samples.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT / "examples")!r})
            import anyio
            from shout import runtime, SHOUT
            {textwrap.indent(harness, " " * 12).strip()}
            anyio.run(test_shout)
            print("harness ok")
            """
        )
        + "\n"
        + engine
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "harness ok" in proc.stdout
    assert "b'HI'" in proc.stdout
    assert "EMPTY_TEXT input media:enc=utf-8" in proc.stdout
