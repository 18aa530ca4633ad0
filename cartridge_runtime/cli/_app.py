"""The typer application every sub-command module registers itself on.

Imported only when a command runs (or a shell completes one): ``cartridge --help`` and
``cartridge COMMAND --help`` are answered from the stored texts in :mod:`._help_texts` without
importing typer (see :mod:`._quick`). Help is rendered plain (click's layout) at a fixed width,
so the stored texts and a live rendering are the same bytes.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any, Final

import typer
import typer.main

from ._commands import COMMAND_MODULES
from ._quick import version_line

__all__ = ("app", "CONTEXT", "sub_app", "build_command", "render_help_texts", "value_options")

#: Help width, fixed so that the stored texts equal a live rendering on any terminal.
HELP_WIDTH: Final = 80

#: The context settings of every command and group: ``-h`` beside ``--help``.
CONTEXT: Final[dict[str, Any]] = {
    "help_option_names": ["-h", "--help"],
    "terminal_width": HELP_WIDTH,
    "max_content_width": HELP_WIDTH,
}


app = typer.Typer(
    name="cartridge",
    help="Run, call, test and certify Bifaci v6 cartridges.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(version_line(), nl=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """Run, call, test and certify Bifaci v6 cartridges."""


def sub_app(name: str, help_text: str) -> typer.Typer:
    """A command group (``cartridge cache ...``) with the root's settings, added to ``app``."""
    group = typer.Typer(
        name=name,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        context_settings=CONTEXT,
    )
    app.add_typer(group)
    return group


def build_command(commands: Iterable[str] | None = None) -> Any:
    """The click command of ``app`` with ``commands`` registered (``None``: all of them),
    with plain parameter labels."""
    from ._help import plain_help

    wanted = COMMAND_MODULES if commands is None else commands
    for module in dict.fromkeys(COMMAND_MODULES[c] for c in wanted if c in COMMAND_MODULES):
        importlib.import_module(f"{__package__}.{module}")
    # Listed in the table's order, whichever module was imported first.
    order = {name: index for index, name in enumerate(COMMAND_MODULES)}
    app.registered_commands.sort(key=lambda info: order.get(info.name or "", len(order)))
    app.registered_groups.sort(key=lambda info: order.get(_group_name(info), len(order)))
    return plain_help(typer.main.get_command(app))


def _group_name(info: Any) -> str:
    """A registered group's command name (given to ``add_typer`` or to its own app)."""
    own = getattr(getattr(info, "typer_instance", None), "info", None)
    return str(info.name or getattr(own, "name", None) or "")


def render_help_texts() -> dict[str, str]:
    """Every command's help as ``cartridge [PATH...] --help`` prints it, by command path
    (``""`` for the root, ``"cache ls"`` for a sub-command of a group)."""
    root = build_command()
    texts: dict[str, str] = {}

    def walk(command: Any, path: list[str], parent: Any) -> None:
        name = " ".join(["cartridge", *path])
        settings = dict(command.context_settings or {})
        with command.context_class(command, parent, name.split()[-1], **settings) as ctx:
            texts[" ".join(path)] = command.get_help(ctx) + "\n"
            for sub_name, sub in sorted(getattr(command, "commands", {}).items()):
                walk(sub, [*path, sub_name], ctx)

    walk(root, [], None)
    return texts


def value_options() -> dict[str, frozenset[str]]:
    """By command path: the option names that take a value (the token after one is never
    read as ``--help``)."""
    taken: dict[str, frozenset[str]] = {}

    def walk(command: Any, path: list[str]) -> None:
        subs = getattr(command, "commands", {})
        if not subs:
            names = {
                name
                for param in command.params
                if getattr(param, "param_type_name", "") == "option" and not param.is_flag
                for name in (*param.opts, *param.secondary_opts)
            }
            taken[" ".join(path)] = frozenset(names)
        for sub_name, sub in sorted(subs.items()):
            walk(sub, [*path, sub_name])

    walk(build_command(), [])
    return taken
