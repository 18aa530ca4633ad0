"""CLI mode, part one: from a command line to the cap's input streams, and the help texts.

A cartridge script run with arguments is a command-line tool (CLI-1). This module is the
pure half of that: it reads the cap definition (:class:`~cartridge_runtime.manifest.CapDef`) and
the tokens after the alias, and produces the list of :class:`CliInput` values the handler will
see as its input streams. Nothing here runs a handler or writes to a terminal.

Mapping, per declared argument, trying its sources in declaration order:

* ``cli_flag``: ``--flag value`` or ``--flag=value``, the flag text exactly as declared;
* ``position``: the Nth positional token (0-based);
* ``stdin``: all of standard input, only when stdin is not a terminal and is not empty.

Then the ``default_value``, as :attr:`~cartridge_runtime.manifest.ArgDef.default_bytes` gives it
(bool → ``true``/``false``, text → its UTF-8, number → its JSON text, list or map → JSON).
A required argument that got nothing is a :class:`CliUsageError`. A value from stdin is
labelled with the stdin source's media URN, any other with the argument's own URN.

An argument whose media URN conforms to ``media:file-path`` and that has a stdin source is a
file path: the path (or glob) is expanded, the file is read and the value relabelled with the
stdin URN. A glob matching several files on an argument that is not ``is_sequence`` makes
:func:`plan_invocations` return one invocation per file (the handler runs once per file); on an
``is_sequence`` argument every file becomes one item of a sequence input.

Stricter than the reference (which guesses): an option this cap does not declare, a declared
flag without a value, the same flag twice, or more positional tokens than the cap declares are
all usage errors, and ``--`` ends option parsing.
"""

from __future__ import annotations

import glob
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final

import attrs

from cartridge_runtime._redact import describe, describe_meta
from cartridge_runtime.manifest import (
    ArgDef,
    CapDef,
    CliFlagSource,
    Manifest,
    PositionSource,
    StdinSource,
)
from cartridge_runtime.protocol import AttributionClass, ErrorCode
from cartridge_runtime.urn import MediaUrn, UrnError

from .._errors import CartridgeError

__all__ = (
    "CliUsageError",
    "CliInput",
    "StdinReader",
    "parse_tokens",
    "plan_invocations",
    "program_help",
    "cap_help",
    "cap_synopsis",
)

#: Media URN every file-path argument conforms to.
FILE_PATH_URN: Final = MediaUrn.parse("media:file-path")
#: Help flags (reserved by RULE10, so no cap can declare them).
HELP_FLAGS: Final = frozenset({"--help", "-h"})
#: Bytes read from stdin per step when it is streamed into the handler.
STDIN_BLOCK: Final = 262_144


class CliUsageError(CartridgeError):
    """The command line does not match the cap definition (exit status 2)."""

    code = ErrorCode.USAGE
    attribution_class = AttributionClass.USER


@attrs.frozen(kw_only=True)
class CliInput:
    """One input stream of a CLI invocation.

    Exactly one of ``data`` (the whole value), ``items`` (a sequence input, one item per
    element) or ``reader`` (standard input, streamed block by block) is set.
    """

    media_urn: str
    arg_name: str
    data: bytes | None = attrs.field(default=None, repr=describe)
    items: tuple[bytes, ...] | None = attrs.field(default=None, repr=describe)
    reader: StdinReader | None = attrs.field(default=None, eq=False)

    @property
    def is_sequence(self) -> bool:
        """Whether this input is a sequence stream (one item per file)."""
        return self.items is not None


class StdinReader:
    """Standard input, read lazily and only once.

    ``present()`` answers "was anything piped?" by reading the first block (a terminal, or an
    empty pipe, counts as absent); ``blocks()`` then yields that block and the rest, so a large
    stdin streams into the handler without being held in memory.
    """

    def __init__(self, stream: BinaryIO | None, *, is_tty: bool | None = None) -> None:
        self._stream = stream
        self._is_tty = is_tty
        self._first: bytes | None = None
        self._probed = False
        self._taken = False

    def regular_file(self) -> Path | None:
        """The file standard input is, when it is a regular one with bytes in it (its size is
        then known, and the engine sends it with its size for progress), else ``None``."""
        if self._stream is None or self._taken:
            return None
        try:
            fd = self._stream.fileno()
            info = os.fstat(fd)
        except (AttributeError, OSError, ValueError):
            return None
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return None
        return Path(f"/dev/fd/{fd}")

    def _tty(self) -> bool:
        if self._stream is None:
            return True
        if self._is_tty is not None:
            return self._is_tty
        try:
            return os.isatty(self._stream.fileno())
        except (AttributeError, OSError, ValueError):
            return False

    def _read(self, n: int) -> bytes:
        """Up to ``n`` bytes, returning as soon as some are available (``read1``)."""
        assert self._stream is not None
        read = getattr(self._stream, "read1", None) or self._stream.read
        return bytes(read(n))

    def present(self) -> bool:
        """Whether stdin holds at least one byte (reads the first block to find out)."""
        if not self._probed:
            self._probed = True
            if self._stream is not None and not self._tty():
                self._first = self._read(STDIN_BLOCK) or None
        return self._first is not None

    def was_empty(self) -> bool:
        """Whether stdin was piped (not a terminal) and held no byte at all."""
        return self._probed and self._stream is not None and not self._tty() and not self._first

    def blocks(self) -> Any:
        """Yield stdin's bytes block by block (once; a second call yields nothing)."""
        if self._taken or not self.present():
            return
        self._taken = True
        first, self._first = self._first, None
        if first:
            yield first
        while True:
            block = self._read(STDIN_BLOCK)
            if not block:
                return
            yield block

    def pipe_fd(self) -> int | None:
        """Standard input's fd when it is a pipe or socket with bytes in it (its reader can
        then wait on it without a thread), else ``None``."""
        if self._stream is None or self._taken or not self.present():
            return None
        try:
            fd = self._stream.fileno()
            mode = os.fstat(fd).st_mode
        except (AttributeError, OSError, ValueError):
            return None
        return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None

    def take_first(self) -> bytes | None:
        """Take the block ``present()`` read (once): whoever reads the rest from the fd
        itself starts with it."""
        self.present()
        self._taken = True
        first, self._first = self._first, None
        return first

    def read_all(self) -> bytes:
        """Everything on stdin (for values that must be whole, such as a file path)."""
        return b"".join(self.blocks())


# -- token parsing ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ParsedTokens:
    """The tokens after the alias, split into declared flags and positionals."""

    flags: dict[str, str] = attrs.field(repr=describe_meta)
    positionals: tuple[str, ...] = attrs.field(repr=describe)
    help: bool = False


def _declared_flags(cap: CapDef) -> set[str]:
    return {s.flag for arg in cap.args for s in arg.sources if isinstance(s, CliFlagSource)}


def _position_count(cap: CapDef) -> int:
    return sum(1 for arg in cap.args for s in arg.sources if isinstance(s, PositionSource))


def parse_tokens(cap: CapDef, tokens: Sequence[str]) -> ParsedTokens:
    """Split ``tokens`` into the cap's flags and positionals.

    :raises CliUsageError: unknown option, flag without value, repeated flag, or too many
        positional arguments.
    """
    known = _declared_flags(cap)
    alias = cap.aliases[0]
    flags: dict[str, str] = {}
    positionals: list[str] = []
    want_help = False
    i = 0
    options_done = False
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if options_done or token == "-" or not token.startswith("-"):
            positionals.append(token)
            continue
        if token == "--":
            options_done = True
            continue
        if token in HELP_FLAGS:
            want_help = True
            continue
        name, eq, value = token.partition("=")
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise CliUsageError(f"'{alias}' has no option {name!r} (its options: {listed})")
        if not eq:
            if i >= len(tokens):
                raise CliUsageError(f"option {name} of '{alias}' needs a value")
            value = tokens[i]
            i += 1
        if name in flags:
            raise CliUsageError(f"option {name} of '{alias}' is given more than once")
        flags[name] = value
    limit = _position_count(cap)
    if len(positionals) > limit:
        extra = len(positionals) - limit
        raise CliUsageError(
            f"'{alias}' takes {limit} positional argument(s); got {extra} more "
            f"(from position {limit}, counting from 0)"
        )
    return ParsedTokens(flags=flags, positionals=tuple(positionals), help=want_help)


# -- values -------------------------------------------------------------------------------


def _is_file_path(arg: ArgDef) -> bool:
    if arg.stdin_source is None:
        return False
    try:
        return MediaUrn.parse(arg.media_urn).satisfies(FILE_PATH_URN)
    except UrnError:
        return False


def expand_paths(raw: str, arg: ArgDef) -> list[Path]:
    """The regular files a file-path value names (a literal path or one glob pattern).

    :raises CliUsageError: missing file, not a regular file, bad or empty glob.
    """
    if any(ch in raw for ch in "*?["):
        depth = 0
        for ch in raw:
            depth += (ch == "[") - (ch == "]")
            if depth < 0:
                break
        if depth != 0:
            raise CliUsageError(
                f"invalid glob pattern {raw!r} for '{arg.name}': unbalanced brackets"
            )
        matches = sorted(Path(p) for p in glob.glob(raw))
        files = [p for p in matches if p.is_file()]
        if not files:
            raise CliUsageError(f"no file matches {raw!r} for '{arg.name}'")
        return files
    path = Path(raw)
    if not path.exists():
        raise CliUsageError(f"file not found for '{arg.name}': {raw}")
    if not path.is_file():
        raise CliUsageError(f"not a regular file for '{arg.name}': {raw}")
    return [path]


def _read(path: Path, arg: ArgDef) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliUsageError(f"cannot read {path} for '{arg.name}': {exc.strerror}") from None


@attrs.frozen(kw_only=True)
class _Raw:
    """An argument's raw value before file-path resolution."""

    arg: ArgDef
    media_urn: str
    data: bytes | None = attrs.field(default=None, repr=describe)
    reader: StdinReader | None = None


def _how_to_give(arg: ArgDef, *, stdin: bool = True) -> str:
    ways = []
    for source in arg.sources:
        if isinstance(source, CliFlagSource):
            ways.append(f"{source.flag} <{arg.name}>")
        elif isinstance(source, PositionSource):
            ways.append(f"position {source.index}")
        elif stdin:
            ways.append("standard input")
    return " or ".join(ways)


def _missing_hint(arg: ArgDef, stdin: StdinReader) -> str:
    """How to give a missing argument; an empty pipe or file on stdin is named as such."""
    if not (stdin.was_empty() and any(isinstance(s, StdinSource) for s in arg.sources)):
        return f"give it as {_how_to_give(arg)}"
    others = _how_to_give(arg, stdin=False)
    return "standard input was empty" + (f"; or give it as {others}" if others else "")


def _raw_values(cap: CapDef, parsed: ParsedTokens, stdin: StdinReader) -> list[_Raw]:
    values: list[_Raw] = []
    for arg in cap.args:
        found: _Raw | None = None
        for source in arg.sources:
            if isinstance(source, CliFlagSource) and source.flag in parsed.flags:
                found = _Raw(
                    arg=arg, media_urn=arg.media_urn, data=parsed.flags[source.flag].encode("utf-8")
                )
            elif isinstance(source, PositionSource) and source.index < len(parsed.positionals):
                found = _Raw(
                    arg=arg,
                    media_urn=arg.media_urn,
                    data=parsed.positionals[source.index].encode("utf-8"),
                )
            elif isinstance(source, StdinSource) and stdin.present():
                found = _Raw(arg=arg, media_urn=source.media_urn, reader=stdin)
            if found is not None:
                break
        default = arg.default_bytes  # CLI-8: the same bytes every caller gives
        if found is None and default is not None:
            found = _Raw(arg=arg, media_urn=arg.media_urn, data=default)
        if found is None:
            if arg.required:
                raise CliUsageError(
                    f"'{cap.aliases[0]}' needs its argument '{arg.name}' ({arg.media_urn}); "
                    + _missing_hint(arg, stdin)
                )
            continue
        values.append(found)
    return values


def plan_invocations(
    cap: CapDef, tokens: Sequence[str], stdin: StdinReader
) -> list[list[CliInput]]:
    """The handler runs to make for ``cap`` given the tokens after its alias: usually one list
    of inputs; one per file when a scalar file-path argument's glob matched several files.

    :raises CliUsageError: any mismatch between the command line and the cap definition.
    """
    parsed = parse_tokens(cap, tokens)
    raws = _raw_values(cap, parsed, stdin)
    base: list[CliInput] = []
    fan_out: tuple[int, list[Path]] | None = None
    for raw in raws:
        arg = raw.arg
        if raw.reader is not None:
            base.append(CliInput(media_urn=raw.media_urn, arg_name=arg.name, reader=raw.reader))
            continue
        assert raw.data is not None
        source = arg.stdin_source
        if not _is_file_path(arg) or source is None:
            base.append(CliInput(media_urn=raw.media_urn, arg_name=arg.name, data=raw.data))
            continue
        paths = expand_paths(raw.data.decode("utf-8", errors="surrogateescape"), arg)
        if arg.is_sequence:
            items = tuple(_read(p, arg) for p in paths)
            base.append(CliInput(media_urn=source.media_urn, arg_name=arg.name, items=items))
        elif len(paths) == 1:
            base.append(
                CliInput(media_urn=source.media_urn, arg_name=arg.name, data=_read(paths[0], arg))
            )
        else:
            if fan_out is not None:
                raise CliUsageError(
                    "two file-path arguments each matched several files; "
                    "at most one may fan out over files"
                )
            fan_out = (len(base), paths)
            base.append(CliInput(media_urn=source.media_urn, arg_name=arg.name, data=b""))
    if fan_out is None:
        return [base]
    index, paths = fan_out
    arg_name = base[index].arg_name
    runs = []
    for path in paths:
        run = list(base)
        arg = next(a for a in cap.args if a.name == arg_name)
        run[index] = attrs.evolve(base[index], data=_read(path, arg))
        runs.append(run)
    return runs


# -- help ---------------------------------------------------------------------------------


def _arg_forms(arg: ArgDef) -> list[str]:
    forms = []
    for source in arg.sources:
        if isinstance(source, CliFlagSource):
            forms.append(f"{source.flag} <{arg.name}>")
        elif isinstance(source, PositionSource):
            forms.append(f"<{arg.name}>")
        else:
            forms.append("< stdin")
    return forms


def cap_synopsis(cap: CapDef) -> str:
    """One line: the alias and how each argument is given, optional ones in brackets."""
    parts = [cap.aliases[0]]
    for arg in cap.args:
        forms = _arg_forms(arg)
        text = forms[0] if len(forms) == 1 else "(" + " | ".join(forms) + ")"
        parts.append(text if arg.required else f"[{text}]")
    return " ".join(parts)


def program_help(manifest: Manifest, prog: str) -> str:
    """The ``--help`` text: the cartridge, its commands by alias and their arguments."""
    lines = [
        f"{manifest.name} {manifest.version} — {manifest.description}",
        "",
        "Usage:",
        f"  {prog} <command> [arguments]   run a cap",
        f"  {prog} <command> --help        describe one command",
        f"  {prog} manifest                print the manifest JSON",
        f"  {prog}                         (no arguments) serve Bifaci v6 frames on stdin/stdout",
        "",
        "Commands:",
    ]
    caps = manifest.all_caps()
    width = max((len(cap.aliases[0]) for cap in caps), default=8)
    for cap in caps:
        summary = cap.title
        if cap.cap_description:
            summary = f"{cap.title}: {cap.cap_description.splitlines()[0]}"
        lines.append(f"  {cap.aliases[0]:<{width}}  {summary}")
        lines.append(f"  {'':<{width}}    usage: {prog} {cap_synopsis(cap)}")
        if len(cap.aliases) > 1:
            lines.append(f"  {'':<{width}}    aliases: {', '.join(cap.aliases[1:])}")
    return "\n".join(lines) + "\n"


def cap_help(cap: CapDef, prog: str) -> str:
    """The ``ALIAS --help`` text: title, description, usage, every argument and output."""
    lines = [cap.title]
    if cap.cap_description:
        lines.append(cap.cap_description)
    if cap.documentation:
        lines += ["", cap.documentation]
    lines += ["", "Usage:", f"  {prog} {cap_synopsis(cap)}", "", f"Cap: {cap.urn}"]
    if len(cap.aliases) > 1:
        lines.append(f"Aliases: {', '.join(cap.aliases)}")
    lines += ["", "Arguments:"]
    if not cap.args:
        lines.append("  (none)")
    for arg in cap.args:
        status = "required" if arg.required else "optional"
        lines.append(f"  {arg.name}  ({arg.media_urn}, {status})")
        lines.append(f"      given as: {'; '.join(_describe_source(arg, s) for s in arg.sources)}")
        if arg.arg_description:
            lines.append(f"      {arg.arg_description}")
        if arg.default_value is not None:
            lines.append(
                f"      default: {json.dumps(arg.default_value)} (used when not given, "
                "by every caller)"
            )
        if _is_file_path(arg):
            lines.append("      a file path or glob; the file's contents are passed on")
        if arg.is_sequence:
            lines.append("      a sequence (one item per value)")
    lines += ["", "Outputs:"]
    if not cap.outputs:
        lines.append("  (none)")
    main = cap.main_output()
    for out in cap.outputs:
        role = "main, printed to stdout" if out is main else "not printed"
        if out.optional:
            role += ", optional"
        lines.append(f"  {out.name}  ({out.media_urn}; {role})")
        lines.append(f"      {out.output_description}")
    return "\n".join(lines) + "\n"


def _describe_source(arg: ArgDef, source: Any) -> str:
    if isinstance(source, CliFlagSource):
        return f"{source.flag} <value> or {source.flag}=<value>"
    if isinstance(source, PositionSource):
        return f"position {source.index} (positions count from 0, as in the manifest)"
    return f"standard input (as {source.media_urn})"
