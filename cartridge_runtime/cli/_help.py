"""Help texts in the words of the command line, not of Python.

Typer labels each parameter with its Python type (``<str>``, ``<list[str]>``, ``<bool>``) and
writes required arguments as ``{name}``. :func:`plain_help` walks the built click command and
gives every parameter a label from its metavar instead: ``TARGET`` for an argument (``[NAME]``
when optional), ``--output-dir DIR`` for an option, nothing for a flag.

The same classes coerce a value without pydantic when its type is a plain one
(:mod:`._coerce`): typer's adapters are the slowest part of a command's start.
"""

from __future__ import annotations

from typing import Any

from typer import BadParameter
from typer.core import TyperArgument, TyperOption

from ._coerce import light_coercer

__all__ = ("plain_help",)


def _process(param: Any, ctx: Any, value: Any, typer_way: Any) -> Any:
    """``param``'s value coerced without pydantic when its type allows (else typer's way)."""
    descriptor = param.type_descriptor
    convert = light_coercer(descriptor.annotation, descriptor.parameter_info)
    multiple = param.multiple or param.nargs == -1
    if convert is None or (multiple and isinstance(value, str)):
        return typer_way(ctx, value)
    if value is None:
        value = () if multiple else None
    else:
        try:
            value = convert(value)
        except ValueError as error:
            raise BadParameter(str(error), ctx=ctx, param=param) from None
    if param.required and param.value_is_missing(value):
        return typer_way(ctx, None)  # its MissingParameter
    if param.callback is not None:
        value = param.callback(ctx, param, value)
    return value


class _PlainArgument(TyperArgument):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.metavar or (self.name or "ARG").upper()
        if not self.required:
            name = f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


class _PlainOption(TyperOption):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)

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
