"""``cartridge new NAME [--dir DIR]``: scaffold a cartridge script and its test.

Writes ``NAME.py`` (a working cartridge with two caps, from ``templates/cartridge.py.tmpl``),
``test_NAME.py`` (in-process tests through :mod:`cartridge_runtime.testing`, from
``templates/test_cartridge.py.tmpl``) and, where the directory has no pytest configuration
yet, ``pytest.ini`` (pytest-asyncio's settings, so the first run has no warning). The
generated test passes and the cartridge passes the conformance kit as generated. Existing
files are never overwritten unless ``--force`` is given (an existing pytest configuration is
never touched).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Final

import typer

from ._app import app

__all__ = ("NAME_PATTERN", "ScaffoldError", "render", "scaffold")

#: A cartridge name: it becomes a file name, a manifest name and part of each cap's ``op`` tag.
NAME_PATTERN: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

_TEMPLATES: Final = (
    ("cartridge.py.tmpl", "{name}.py"),
    ("test_cartridge.py.tmpl", "test_{name}.py"),
)
#: The pytest configuration the generated test needs (pytest-asyncio's mode and loop scope, so
#: the first run is quiet); written only where no pytest configuration exists yet.
_PYTEST_TEMPLATE: Final = ("pytest.ini.tmpl", "pytest.ini")
#: Files that hold a pytest configuration, and the section that makes them one.
_PYTEST_CONFIGS: Final = (
    ("pytest.ini", ""),
    ("pyproject.toml", "[tool.pytest"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


class ScaffoldError(Exception):
    """The name is unusable or a target file exists (the message says which)."""


def render(template: str, name: str) -> str:
    """The text of template ``template`` for a cartridge called ``name``.

    ``__NAME__`` becomes the name as given and ``__TAG__`` its lower-case form (cap URN tag
    values are case-folded, so the URNs in the file stay canonical).
    """
    text = resources.files("cartridge_runtime").joinpath("templates", template).read_text("utf-8")
    return text.replace("__NAME__", name).replace("__TAG__", name.lower())


def scaffold(name: str, directory: Path, *, force: bool = False) -> list[Path]:
    """Write the cartridge and its test into ``directory`` (created if missing).

    :raises ScaffoldError: ``name`` does not match :data:`NAME_PATTERN`, or a file exists and
        ``force`` is false (nothing is written then).
    """
    if not NAME_PATTERN.fullmatch(name):
        raise ScaffoldError(
            f"invalid cartridge name {name!r}: use a letter, then letters, digits, '_' or '-' "
            "(at most 64 characters)"
        )
    targets = [
        (template, directory / pattern.format(name=name)) for template, pattern in _TEMPLATES
    ]
    existing = [str(path) for _, path in targets if path.exists()]
    if existing and not force:
        raise ScaffoldError(f"refusing to overwrite {', '.join(existing)} (use --force)")
    if not _has_pytest_config(directory):
        template, file_name = _PYTEST_TEMPLATE
        targets.append((template, directory / file_name))
    directory.mkdir(parents=True, exist_ok=True)
    for template, path in targets:
        path.write_text(render(template, name), encoding="utf-8")
    return [path for _, path in targets]


def _has_pytest_config(directory: Path) -> bool:
    for file_name, section in _PYTEST_CONFIGS:
        path = directory / file_name
        if path.is_file():
            try:
                if section in path.read_text(encoding="utf-8", errors="replace"):
                    return True
            except OSError:
                return True  # unreadable: leave it alone
    return False


@app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="Cartridge name (file NAME.py, manifest name).")],
    directory: Annotated[
        Path, typer.Option("--dir", "-d", help="Directory to write into (created if missing).")
    ] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Scaffold a new cartridge script NAME.py and its test test_NAME.py."""
    try:
        written = scaffold(name, directory, force=force)
    except (ScaffoldError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(
        f"next: python -m pytest {written[1]}  |  python {written[0]} --help\n"
        "(the test needs pytest and pytest-asyncio: pip install 'cartridge-runtime[testing]')"
    )
