"""Every command and code sample of the README and of the engine guide runs as written.

The README is the door: two commands, one cartridge, one engine call, one machine, and links.
What it used to hold in full moved to ``docs/engine-guide.md`` (engine, machines, the
``cartridge`` command) and ``docs/handler-guide.md`` (the pytest form of the harness), and is
checked there: every ```` ```sh ```` line of the README and of the engine guide runs (a
```` ```console ```` block is shown, not run: the Ray cluster commands, which start processes
that outlive a test), and every engine-guide block that starts with ``# test: run`` runs and
its assertions hold.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: The checkout: the nearest folder above this file that holds ``pyproject.toml``.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
README = (ROOT / "README.md").read_text(encoding="utf-8")
ENGINE_GUIDE = (ROOT / "docs" / "engine-guide.md").read_text(encoding="utf-8")
HANDLER_GUIDE = (ROOT / "docs" / "handler-guide.md").read_text(encoding="utf-8")
MARKER = "# test: run"

#: The README's budget: a door, not a house.
README_MAX_LINES = 150

#: Commands that a test runs elsewhere, or that would recurse.
NOT_HERE = {
    "./scripts/test": "it is the command running this test",
}

#: Documents the README links to, each of which must exist.
README_LINKS = (
    "docs/handler-guide.md",
    "docs/engine-guide.md",
    "docs/architecture.md",
    "docs/operations.md",
    "docs/runs.md",
    "protocol_spec/README.md",
    "benchmarks/README.md",
    "benchmarks/RESULTS.md",
    "cartridges/README.md",
    "CHANGELOG.md",
)


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _commands(text: str) -> list[str]:
    out = []
    for block in _blocks(text, "sh"):
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd and cmd not in NOT_HERE:
                out.append(cmd)
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("CI", None)
    return env


def _run_script(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "sample.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- the README -----------------------------------------------------------------------------


def test_readme_is_a_door() -> None:
    """Short, with the three examples and a link to every document."""
    assert len(README.splitlines()) <= README_MAX_LINES
    assert len(_blocks(README, "python")) == 3
    for target in README_LINKS:
        assert f"]({target})" in README, target
        assert (ROOT / target).is_file(), target


def test_readme_lists_the_two_commands() -> None:
    assert "./scripts/demo" in README and "./scripts/test" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci


def test_example_cartridge_in_readme_is_the_file() -> None:
    example = (ROOT / "examples" / "shout.py").read_text()
    (block,) = [b for b in _blocks(README, "python") if "@runtime.op(SHOUT)" in b]
    assert block.strip() in example


def test_first_example_shows_the_decorator_form_and_the_contexts() -> None:
    first = _blocks(README, "python")[0]
    assert "@runtime.op(SHOUT)" in first and "async def shout(req: Request)" in first
    assert "class Words(Op)" in first  # the class form, beside it
    prose = README.split(first, 1)[1].split("```", 2)[1]  # up to the next code block
    for name in ("`DryContext`", "`WetContext`"):
        (line,) = [ln for ln in prose.splitlines() if ln.startswith(f"- {name}")]
        assert len(line) <= 100


def test_readme_engine_sample_runs(tmp_path: Path) -> None:
    (engine,) = [b for b in _blocks(README, "python") if "engine.call(" in b]
    assert "engine.call(" in engine and "add_cartridge(" in engine
    proc = _run_script(engine, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["b'HI'", "EMPTY_TEXT input media:enc=utf-8"]


def test_readme_machine_sample_runs(tmp_path: Path) -> None:
    (machine,) = [b for b in _blocks(README, "python") if "run_machine(" in b]
    assert "doc -> split -> words" in machine  # the notation itself is in the sample
    proc = _run_script(machine, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["b'HELLO MACHINES' 2"]


def test_readme_says_no_figure_of_the_benchmarks() -> None:
    """Figures live with the benchmarks, dated."""
    assert not re.search(r"\d+(\.\d+)? ?(MB/s|calls/s|ms\b)", README)


# -- the engine guide -----------------------------------------------------------------------


def _guide_snippets() -> list[tuple[str, str]]:
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```", ENGINE_GUIDE, flags=re.S | re.M):
        code = match.group(1)
        if code.splitlines()[:1] == [MARKER]:
            line = ENGINE_GUIDE.count("\n", 0, match.start()) + 1
            found.append((f"engine-guide-L{line}", code))
    return found


GUIDE_SNIPPETS = _guide_snippets()


def test_engine_guide_has_its_tested_samples() -> None:
    """Calls, replicas and the machine API, each a tested program (guards a lost marker)."""
    codes = [code for _, code in GUIDE_SNIPPETS]
    assert len(codes) >= 3
    assert any("async with engine.call(" in c for c in codes)  # the streaming form
    assert any("replicas=2" in c for c in codes)
    assert any("engine.machine(" in c and "parse_machine(" in c for c in codes)


@pytest.mark.parametrize("code", [c for _, c in GUIDE_SNIPPETS], ids=[i for i, _ in GUIDE_SNIPPETS])
def test_engine_guide_sample_runs(code: str, tmp_path: Path) -> None:
    proc = _run_script(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_engine_guide_machine_sample_prints_the_canonical_text(tmp_path: Path) -> None:
    (code,) = [c for _, c in GUIDE_SNIPPETS if "engine.machine(" in c]
    proc = _run_script(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("edge_0 cap:")


# -- the shell commands of both ---------------------------------------------------------------


@pytest.mark.parametrize("command", _commands(README) + _commands(ENGINE_GUIDE))
def test_readme_command_runs(command: str, tmp_path: Path) -> None:
    command = command.replace("/tmp/", f"{tmp_path}/")
    proc = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=_env(), capture_output=True, timeout=180
    )
    assert proc.returncode == 0, (
        f"{command!r} exited {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
        f"stderr: {proc.stderr[-2000:]!r}"
    )


def test_every_engine_guide_command_names_a_real_subcommand() -> None:
    """The table of the ``cartridge`` command lists what ``cartridge --help`` lists."""
    proc = subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", "--help"],
        cwd=ROOT,
        env=_env() | {"COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    listed = set(re.findall(r"^\| `cartridge (\w+)", ENGINE_GUIDE, flags=re.M))
    commands = proc.stdout.split("Commands", 1)[-1]  # rich boxes or plain columns
    helped = set(re.findall(r"^[│ ]\s*([a-z]+)\s{2,}\S", commands, flags=re.M))
    assert helped and listed == helped


# -- the harness in pytest form, moved to the handler guide --------------------------------


def _pytest_snippet() -> list[str]:
    return [
        b
        for b in _blocks(HANDLER_GUIDE, "python")
        if "CartridgeHarness(runtime)" in b and "@pytest.mark.asyncio" in b
    ]


def test_testing_snippet_runs_under_pytest_as_written(tmp_path: Path) -> None:
    """The handler guide's pytest example, saved as a test file next to the example cartridge,
    passes under pytest with the configuration ``cartridge new`` writes, and warns of nothing."""
    from cartridge_runtime.cli.new import render

    (block,) = _pytest_snippet()
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


def test_the_pytest_snippet_also_runs_without_pytest(tmp_path: Path) -> None:
    """The same snippet, its test function run by anyio alone, passes its assertions."""
    (block,) = _pytest_snippet()
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT / "examples")!r})
        import anyio
        {textwrap.indent(block, " " * 8).strip()}
        anyio.run(test_shout)
        print("harness ok")
        """
    )
    proc = _run_script(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["harness ok"]


# -- the shell blocks of the handler guide ---------------------------------------------------


@pytest.mark.parametrize("block", _blocks(HANDLER_GUIDE, "sh"))
def test_handler_guide_shell_block_runs(block: str, tmp_path: Path) -> None:
    """Each block runs whole, in order (a later line may use what an earlier one made)."""
    script = "set -e\n" + block.replace("/tmp/", f"{tmp_path}/")
    proc = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=_env(), capture_output=True, timeout=300
    )
    assert proc.returncode == 0, (
        f"exited {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
        f"stderr: {proc.stderr[-2000:]!r}"
    )


def test_the_guides_tee_in_front_of_a_cartridge_records_call_and_run(tmp_path: Path) -> None:
    """The ``bash`` block that puts ``cartridge tee`` in front of a cartridge, run as written
    (its ``/tmp/`` in a folder of the test's own) for ``call`` and for ``run``."""
    (block,) = [b for b in _blocks(ENGINE_GUIDE, "bash") if "cartridge tee" in b]
    (tmp_path / "words.machine").write_text(
        'w cap:in="media:enc=utf-8";out="media:enc=utf-8;list";words\ndoc -> w -> out\n'
    )
    lines = block.replace("/tmp/", f"{tmp_path}/").splitlines()
    call = [line for line in lines if "cartridge run" not in line]
    run = [line for line in lines if "cartridge call" not in line]
    for script, marker in ((call, "hello"), (run, "one two")):
        proc = subprocess.run(
            ["bash", "-ec", "\n".join(script)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        frames = proc.stdout
        # The capture decodes, and the input crossed the tee on its way to the cartridge.
        assert "H→C  HELLO" in frames and "C→H  END" in frames
        assert f"b'{marker}" in frames
