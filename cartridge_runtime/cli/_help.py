"""Help texts in the words of the command line, not of Python.

Typer labels each parameter with its Python type (``<str>``, ``<list[str]>``, ``<bool>``) and
writes required arguments as ``{name}``. :func:`plain_help` walks the built click command and
gives every parameter a label from its metavar instead: ``TARGET`` for an argument (``[NAME]``
when optional), ``--output-dir DIR`` for an option, nothing for a flag.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperOption

__all__ = ("plain_help",)


class _PlainArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.metavar or (self.name or "ARG").upper()
        if not self.required:
            name = f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


class _PlainOption(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is not None:
            return self.metavar
        if self.is_flag or self.count:
            return None
        return (self.name or "VALUE").upper()


def plain_help(command: Any) -> Any:
    """``command`` (and its sub-commands) with plain parameter labels; returns it."""
    for param in getattr(command, "params", ()):
        if type(param) is TyperArgument:
            param.__class__ = _PlainArgument
        elif type(param) is TyperOption:
            param.__class__ = _PlainOption
    make_help_option = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make_help_option(ctx)
        if type(option) is TyperOption:
            option.__class__ = _PlainOption
        return option

    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    return command
