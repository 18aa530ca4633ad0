"""``cartridge`` starts at once: help and the version need no typer, a command loads only its
own module, and the stored help texts are the application's own rendering."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.cli._app import render_help_texts, value_options
from cartridge_runtime.cli._commands import COMMAND_MODULES
from cartridge_runtime.cli._help_texts import HELP, SOURCES, VALUE_OPTIONS
from cartridge_runtime.cli._quick import quick_answer, sources_digest

CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def _loaded_after(*argv: str) -> set[str]:
    """The modules imported by ``cartridge ARGV`` (in a fresh interpreter)."""
    probe = textwrap.dedent(
        f"""
        import sys
        sys.argv = ["cartridge", *{list(argv)!r}]
        from cartridge_runtime.cli import main
        try:
            main()
        except SystemExit:
            pass
        sys.stderr.write("\\n".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    return set(done.stderr.splitlines())


def test_stored_help_is_the_application_s_rendering() -> None:
    assert sources_digest() == SOURCES, "run scripts/help_texts.py"
    assert render_help_texts() == HELP, "run scripts/help_texts.py"
    assert value_options() == VALUE_OPTIONS, "run scripts/help_texts.py"


def test_the_command_table_names_every_registered_command() -> None:
    top = {path for path in HELP if path and " " not in path}
    assert top == set(COMMAND_MODULES)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["-h"], ["call", "x.py", "echo", "--help"], ["cache", "ls", "-h"], ["--version"]],
)
def test_help_and_version_import_neither_typer_nor_the_engine(argv: list[str]) -> None:
    loaded = _loaded_after(*argv)
    assert "cartridge_runtime.cli" in loaded
    for heavy in ("typer", "click", "rich", "cartridge_runtime.engine", "anyio"):
        assert heavy not in loaded, heavy


def test_a_command_loads_only_its_own_module(tmp_path: Path) -> None:
    loaded = _loaded_after("runs", "--runs-dir", str(tmp_path))
    assert "cartridge_runtime.cli.runs_cmd" in loaded
    for other in ("call", "run_cmd", "plan_cmd", "machine_cmd", "conform"):
        assert f"cartridge_runtime.cli.{other}" not in loaded, other


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ("", 2, True)),
        (["-h"], ("", 0, False)),
        (["call", "t.py", "echo", "-h"], ("call", 0, False)),
        (["call", "t.py", "echo", "--", "-h"], None),  # the cap's own -h, after --
        (["call", "t.py", "echo", "--arg", "-h"], None),  # a value, not the option
        (["cache"], ("cache", 2, True)),
        (["cache", "--help"], ("cache", 0, False)),
        (["cache", "nope", "--help"], None),  # click names the unknown command
        (["nope", "--help"], None),
        (["run", "m.machine"], None),
    ],
)
def test_quick_answers(argv: list[str], expected: tuple[str, int, bool] | None) -> None:
    answer = quick_answer(argv, {})
    if expected is None:
        assert answer is None
    else:
        path, status, to_stderr = expected
        assert answer is not None
        assert (answer.text, answer.status, answer.to_stderr) == (HELP[path], status, to_stderr)


def test_stale_stored_texts_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import cartridge_runtime.cli._help_texts as stored

    monkeypatch.setattr(stored, "SOURCES", "0" * 64)  # as after an option changed
    assert quick_answer(["-h"], {}) is None
    assert quick_answer(["call", "x.py", "echo", "--help"], {}) is None
    assert quick_answer(["--version"], {}) is not None


def test_a_shell_completing_always_reaches_typer() -> None:
    assert quick_answer(["--help"], {"_CARTRIDGE_COMPLETE": "complete_bash"}) is None


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_takes_h(flag: str) -> None:
    for path in HELP:
        done = subprocess.run(
            [*CLI, *path.split(), flag], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (path, done.stderr)
        assert done.stdout == HELP[path]


def test_shell_completion_completes_commands() -> None:
    env = {**os.environ, "_CARTRIDGE_COMPLETE": "complete_bash", "COMP_WORDS": "cartridge ca",
           "COMP_CWORD": "1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", "from cartridge_runtime.cli import main; main()"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert set(done.stdout.split()) >= {"call", "cache"}, done.stderr
    shown = subprocess.run(
        [*CLI, "--show-completion", "bash"], capture_output=True, text=True, timeout=120
    )
    assert "_CARTRIDGE_COMPLETE" in shown.stdout or "complete" in shown.stdout, shown.stderr


def test_unknown_command_is_a_usage_error() -> None:
    done = subprocess.run([*CLI, "nope"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "No such command 'nope'" in done.stderr


def test_a_warm_listing_does_not_load_the_engine(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    loaded = _loaded_after("list", str(root), "--cache", str(tmp_path / "cache"))
    assert "cartridge_runtime.discovery" in loaded
    for heavy in ("cartridge_runtime.engine", "rich"):
        assert heavy not in loaded, heavy


def test_a_command_s_values_are_coerced_without_pydantic(tmp_path: Path) -> None:
    loaded = _loaded_after("runs", "--runs-dir", str(tmp_path), "-n", "3", "--json")
    assert "cartridge_runtime.cli.runs_cmd" in loaded
    assert "pydantic" not in loaded


def test_a_bad_number_is_refused_in_click_s_words(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "runs", "--runs-dir", str(tmp_path), "-n", "many"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Invalid value for '--limit' / '-n': 'many' is not a valid integer." in done.stderr


def test_light_coercion_of_each_plain_type() -> None:
    import enum

    from typer.models import OptionInfo

    from cartridge_runtime.cli._coerce import light_coercer

    class Shade(enum.Enum):
        DARK = "dark"

    plain = OptionInfo()
    assert light_coercer(Path, plain)("a/b") == Path("a/b")  # type: ignore[misc]
    assert light_coercer(list[Path], plain)(("a", "b")) == [Path("a"), Path("b")]  # type: ignore[misc]
    assert light_coercer(float, plain)("1.5") == 1.5  # type: ignore[misc]
    assert light_coercer(Shade, plain)("dark") is Shade.DARK  # type: ignore[misc]
    assert light_coercer(bool, plain)("yes") is True  # type: ignore[misc]
    with pytest.raises(ValueError, match="is not one of 'dark'"):
        light_coercer(Shade, plain)("light")  # type: ignore[misc]
    assert light_coercer(float, OptionInfo(min=0.5)) is None  # typer checks the bound
    assert light_coercer(Path, OptionInfo(exists=True)) is None
    assert light_coercer(dict, plain) is None


def test_commands_are_listed_in_one_order_whatever_was_imported_first() -> None:
    probe = textwrap.dedent(
        """
        import cartridge_runtime.cli.new, cartridge_runtime.cli.cache_cmd
        from cartridge_runtime.cli._app import render_help_texts
        from cartridge_runtime.cli._help_texts import HELP
        print(render_help_texts()[""] == HELP[""])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "True", done.stderr


def test_a_plain_listing_imports_no_command_line_framework(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    loaded = _loaded_after("list", str(tmp_path / "root"), "--json", "--cache", str(tmp_path))
    assert "cartridge_runtime.cli._listing" in loaded
    for heavy in ("typer", "click", "rich", "cartridge_runtime.engine", "anyio"):
        assert heavy not in loaded, heavy


def _run_list(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*CLI, "list", *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["{root}", "--cache", "{cache}"],
        ["--cache={cache}", "{root}", "--json"],
        ["--json", "--cache", "{cache}", "{root}"],
    ],
)
def test_the_plain_listing_answers_as_the_typer_command_does(
    tmp_path: Path, args: list[str]
) -> None:
    from cartridge_runtime.cli._listing import quick_list

    root, cache = tmp_path / "root", tmp_path / "cache"
    root.mkdir()
    argv = [a.format(root=root, cache=cache) for a in args]
    status, out, err = _run_list(*argv)
    assert (status, err) == (0, "")
    assert str(root) in out
    # Through typer (a token the quick parser leaves to it: "--" before ROOT) the same bytes.
    typed = [a for a in argv if a != str(root)] + ["--", str(root)]
    assert quick_list(typed) is None
    assert _run_list(*typed) == (status, out, err)


@pytest.mark.parametrize("args", [["--bogus"], ["--cache"], ["a", "b"], ["-j"]])
def test_a_usage_error_is_typer_s_own(args: list[str]) -> None:
    from cartridge_runtime.cli._listing import quick_list

    assert quick_list(args) is None
    status, out, err = _run_list(*args)
    assert (status, out) == (2, "")
    assert "Error:" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["--cache="], ["--cache", "x", "--cache=y"], ["--", "r"]])
def test_what_the_quick_parser_does_not_know_goes_to_typer(args: list[str]) -> None:
    from cartridge_runtime.cli._listing import quick_list

    assert quick_list(args) is None


def test_a_missing_root_is_refused_on_one_line_without_typer(tmp_path: Path) -> None:
    status, out, err = _run_list(str(tmp_path / "absent"))
    assert (status, out) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1
