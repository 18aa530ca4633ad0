"""The answers ``cartridge`` gives without importing typer: help and the version.

``cartridge``, ``cartridge -h``, ``cartridge COMMAND --help`` (and ``cartridge GROUP SUB -h``)
print the texts stored in :mod:`._help_texts`, which are the typer application's own rendering
(a test renders them again and compares), so asking for help costs an interpreter's start and
nothing more. The stored texts carry a digest of the sources they were rendered from: when the
sources differ (an option changed and the texts were not written again), typer renders the
help. Anything else, and every shell completion request, goes to the typer application.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

__all__ = ("Answer", "quick_answer", "completing", "sources_digest", "version_line", "HELP_FLAGS")

#: The help options of every command.
HELP_FLAGS: Final = frozenset({"-h", "--help"})
#: The status and stream of a group's help given for a missing sub-command (as click does).
NO_COMMAND_STATUS: Final = 2


#: The modules whose text decides what help says (besides the command modules).
_HELP_SOURCES: Final = ("_app.py", "_help.py", "_commands.py")


def sources_digest() -> str:
    """A digest of the sources the help is rendered from: the stored texts are used only
    while it matches theirs, so a changed option is never described by a stale text."""
    import hashlib
    from pathlib import Path

    from ._commands import COMMAND_MODULES

    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in (*_HELP_SOURCES, *sorted({f"{m}.py" for m in COMMAND_MODULES.values()})):
        try:
            digest.update((here / name).read_bytes())
        except OSError:
            digest.update(b"\0missing\0" + name.encode())
    return digest.hexdigest()


class Answer(NamedTuple):
    """What to print, where, and the exit status."""

    text: str
    status: int = 0
    to_stderr: bool = False


def version_line() -> str:
    """What ``cartridge --version`` prints."""
    from .._version import __version__

    return f"cartridge-runtime {__version__} (Bifaci protocol v6)\n"


def completing(environ: Mapping[str, str]) -> bool:
    """Whether a shell asks for completions (typer reads ``_CARTRIDGE_COMPLETE``)."""
    return any(key.startswith("_CARTRIDGE") and key.endswith("_COMPLETE") for key in environ)


def quick_answer(argv: Sequence[str], environ: Mapping[str, str]) -> Answer | None:
    """The help or version ``argv`` asks for, when it asks for one (``None``: run typer)."""
    if completing(environ):
        return None
    from ._help_texts import HELP, SOURCES, VALUE_OPTIONS

    if argv[:1] == ["--version"]:
        return Answer(version_line())
    answer = _stored_answer(argv, HELP, VALUE_OPTIONS)
    # The sources are hashed only when a stored text is about to be printed (a command that
    # runs does not pay for it); a stale text is never printed: typer renders the help.
    if answer is None or sources_digest() != SOURCES:
        return None
    return answer


def _stored_answer(
    argv: Sequence[str], texts: Mapping[str, str], value_options: Mapping[str, frozenset[str]]
) -> Answer | None:
    """The stored help ``argv`` asks for (``None``: it asks for none)."""
    if not argv:
        return Answer(texts[""], NO_COMMAND_STATUS, to_stderr=True)
    if argv[0] in HELP_FLAGS:
        return Answer(texts[""])
    path: list[str] = []
    rest = list(argv)
    while rest and not rest[0].startswith("-") and " ".join([*path, rest[0]]) in texts:
        path.append(rest.pop(0))
    if not path:
        return None
    key = " ".join(path)
    if any(other.startswith(key + " ") for other in texts):  # a group
        if not rest:
            return Answer(texts[key], NO_COMMAND_STATUS, to_stderr=True)
        return Answer(texts[key]) if rest[0] in HELP_FLAGS else None
    takes_value = value_options.get(key, frozenset())
    skip = False
    for token in rest:
        if skip:
            skip = False
        elif token == "--":
            return None
        elif token in HELP_FLAGS:
            return Answer(texts[key])
        else:
            skip = token in takes_value
    return None
