"""The input side's errors: one branch of the package's error tree.

::

    CartridgeRuntimeError
    └── InputError                  INVALID_INPUT / input: a file argument cannot be used
        ├── NoInputs                no argument at all
        ├── InputNotFound           a path that does not exist
        ├── InputUnreadable         a path that exists but cannot be read as a file
        ├── InvalidGlob             a pattern with unbalanced brackets
        ├── NoFilesMatched          a glob or a folder that leaves no file
        └── InvalidDeclaredMedia    a declared media URN that does not parse

Each one line of text names the path or pattern, so a command-line tool prints
``error: <message>`` and nothing else.
"""

from __future__ import annotations

import os
from typing import Any

from ..protocol import AttributionClass, CartridgeRuntimeError, ErrorCode

__all__ = (
    "InputError",
    "NoInputs",
    "InputNotFound",
    "InputUnreadable",
    "InvalidGlob",
    "NoFilesMatched",
    "InvalidDeclaredMedia",
)


def _restore(cls: type[InputError], args: tuple[Any, ...]) -> InputError:
    """Unpickle one of these errors: its class without ``__init__`` (the fields come back as its
    state), whatever the subclass's constructor takes."""
    return cls.__new__(cls, *args)


class InputError(CartridgeRuntimeError):
    """Root of the input side's errors: a file argument that cannot be used (DET-9).

    :ivar path: the path or pattern concerned (``None`` when there is none).
    """

    code = ErrorCode.INVALID_INPUT
    attribution_class = AttributionClass.INPUT

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else os.fspath(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args), dict(self.__dict__))


class NoInputs(InputError):
    """No file, folder or glob was given."""

    def __init__(self) -> None:
        super().__init__("no input given: name a file, a folder or a glob")


class InputNotFound(InputError):
    """A file or folder argument does not exist."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(f"no such file or folder: {os.fspath(path)}", path=path)


class InputUnreadable(InputError):
    """A path exists but cannot be read as a file (permission, not a regular file, an OS
    error); ``reason`` says which."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"cannot read {os.fspath(path)}: {reason}", path=path)
        self.reason = reason


class InvalidGlob(InputError):
    """A glob pattern that cannot be matched (unbalanced ``[``/``]``)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"invalid glob {pattern!r}: {reason}", path=pattern)


class NoFilesMatched(InputError):
    """A glob or folder argument that leaves no file once junk is skipped."""

    def __init__(self, argument: str) -> None:
        super().__init__(f"no files match {argument!r}", path=argument)


class InvalidDeclaredMedia(InputError):
    """A declared media URN that does not parse (the URN error is the ``__cause__``)."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"the declared media URN {text!r} is not one: {reason}")
        self.text = text
