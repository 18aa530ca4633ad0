"""Every command and code sample in the README runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    (block,) = [b for b in _blocks("python") if "@runtime.op(SHOUT)" in b]
    assert block.strip() in example


def test_first_example_shows_the_decorator_form_and_the_contexts() -> None:
    first = _blocks("python")[0]
    assert "@runtime.op(SHOUT)" in first and "async def shout(req: Request)" in first
    assert "class Words(Op)" in first  # the class form, beside it
    prose = README.split(first, 1)[1].split("```", 2)[1]  # up to the next code block
    for name in ("`DryContext`", "`WetContext`"):
        (line,) = [ln for ln in prose.splitlines() if ln.startswith(f"- {name}")]
        assert len(line) <= 100


def test_testing_snippet_runs_under_pytest_as_written(tmp_path: Path) -> None:
    """The "Testing it" block, saved as a test file next to the example cartridge, passes
    under pytest with the configuration ``cartridge new`` writes, and warns of nothing."""
    from cartridge_runtime.cli.new import render

    (block,) = [b for b in _blocks("python") if "CartridgeHarness(runtime)" in b]
    (tmp_path / "test_snippet.py").write_text(block)
    (tmp_path / "shout.py").write_text((ROOT / "examples" / "shout.py").read_text())
    (tmp_path / "pytest.ini").write_text(render("pytest.ini.tmpl", "shout"))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_snippet.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed" in out and "warning" not in out.lower(), out


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
    harness = next(b for b in _blocks("python") if "CartridgeHarness(runtime)" in b)
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
