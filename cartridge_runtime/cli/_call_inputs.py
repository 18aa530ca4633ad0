"""``cartridge call``, part one: from the command line to the call's inputs.

Checked before anything is spawned (a usage error, exit 2): the cartridge path exists and is
not a directory (or names a command on ``PATH``), a cap given as a URN parses, every ``@FILE``
exists.

Once the manifest is known, the cap is found by alias or URN, and its inputs come from:

* ``--arg MEDIA_URN=VALUE`` or ``--arg NAME=VALUE`` (``NAME`` an argument name the manifest
  declares), with ``@PATH`` for a file's bytes;
* the flags and positionals the manifest declares, spelled exactly as the script's own CLI mode
  takes them (``cartridge call x.py concat hello --suffix ' world'``), and piped stdin for the
  argument whose source is stdin; the mapping is CLI mode's own
  (:func:`cartridge_runtime.runtime._cli._args.plan_invocations`), so defaults, file-path
  arguments and their globs behave the same.

Arguments given with ``--arg`` are taken out of that mapping. When only ``--arg`` inputs are
given (no flags or positionals), piped stdin feeds the main input unless an ``--arg`` gave it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs

from ..manifest import ArgDef, CapDef, StdinSource
from ..runtime._cli._args import CliInput, CliUsageError, StdinReader, plan_invocations
from ..urn import CapUrn, MediaUrn, UrnError
from ._paths import cartridge_problem
from ._usage import UsageError

__all__ = (
    "UsageError",
    "check_before_spawn",
    "split_arg",
    "plan_call_inputs",
)

#: An argument name as ``--arg NAME=VALUE`` takes it (the manifest's names are identifiers).
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def split_arg(text: str, declared: list[str]) -> tuple[str, str]:
    """``MEDIA_URN=VALUE`` -> (urn, value). Media URNs contain ``=`` themselves, so a declared
    argument URN that prefixes the text wins; otherwise the separator is the ``=`` after the last
    complete ``key=value`` tag (a tag is followed by ``;``).

    :raises ValueError: no separator can be found (the message names the form, not the value).
    """
    for urn in sorted(declared, key=len, reverse=True):
        if text.startswith(urn + "="):
            return urn, text[len(urn) + 1 :]
    if not text.startswith("media:"):
        raise ValueError("--arg: expected MEDIA_URN=VALUE with a media: URN, or NAME=VALUE")
    pos = len("media:")
    while True:
        semi = text.find(";", pos)
        end = semi if semi >= 0 else len(text)
        segment = text[pos:end]
        eqs = [i for i, ch in enumerate(segment) if ch == "="]
        if len(eqs) >= 2:
            cut = pos + eqs[1]
            return text[:cut], text[cut + 1 :]
        if semi < 0:
            if len(eqs) == 1:
                cut = pos + eqs[0]
                return text[:cut], text[cut + 1 :]
            raise ValueError("--arg: expected MEDIA_URN=VALUE (no '=' after the media URN)")
        pos = semi + 1


def _split_any(text: str, declared: list[str]) -> tuple[str, str, bool]:
    """(key, value, is_name): ``NAME=VALUE`` when the text does not start with ``media:``."""
    if not text.startswith("media:"):
        name, eq, value = text.partition("=")
        if not eq or not _NAME.fullmatch(name):
            raise ValueError("--arg: expected MEDIA_URN=VALUE or NAME=VALUE")
        return name, value, True
    urn, value = split_arg(text, declared)
    return urn, value, False


def _check_file(value: str, where: str) -> None:
    path = Path(value[1:])
    if not path.exists():
        raise UsageError(f"{where}: file not found: {path}")
    if not path.is_file():
        raise UsageError(f"{where}: not a regular file: {path}")


def check_before_spawn(target: str, cap: str, args: list[str]) -> None:
    """The checks that need no cartridge: its path, the cap URN's syntax, ``@FILE`` arguments.

    :raises UsageError: any of them fails.
    """
    problem = cartridge_problem(target)
    if problem is not None:
        raise UsageError(problem)
    if cap.startswith("cap:"):
        try:
            CapUrn.parse(cap)
        except UrnError as exc:
            raise UsageError(f"invalid cap URN: {exc}") from None
    for index, text in enumerate(args, 1):
        try:
            _key, value, _ = _split_any(text, [])
        except ValueError as exc:
            raise UsageError(f"{exc} (argument {index})") from None
        if value.startswith("@"):
            _check_file(value, f"--arg {index}")


def _same_media(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return MediaUrn.parse(a).is_equivalent(MediaUrn.parse(b))
    except UrnError:
        return False


def _covers(arg: ArgDef, urn: str) -> bool:
    stdin = arg.stdin_source
    return _same_media(arg.media_urn, urn) or (
        stdin is not None and _same_media(stdin.media_urn, urn)
    )


def _value(value: str) -> Any:
    return Path(value[1:]) if value.startswith("@") else value.encode("utf-8")


async def _blocks(reader: StdinReader) -> AsyncIterator[bytes]:
    """Standard input, block by block, read in a worker thread."""
    blocks: Iterator[bytes] = reader.blocks()
    while True:
        block = await anyio.to_thread.run_sync(next, blocks, None, abandon_on_cancel=True)
        if block is None:
            return
        yield block


async def _pipe_blocks(reader: StdinReader, fd: int) -> AsyncIterator[bytes]:
    """A piped stdin, read on the event loop as it becomes readable (large reads, no thread
    per block), after the block ``present()`` already read."""
    from .._plumbing import FdReceiveStream

    first = reader.take_first()
    if first:
        yield first
    stream = FdReceiveStream(fd)
    try:
        while True:
            try:
                yield await stream.receive()
            except anyio.EndOfStream:
                return
    finally:
        stream.restore()


def _stdin_input(reader: StdinReader) -> Any:
    """Standard input as an engine input: a regular file by its path (sent with its size), a
    pipe read on the event loop, anything else block by block in a worker thread."""
    path = reader.regular_file()
    if path is not None:
        return path
    fd = reader.pipe_fd()
    return _pipe_blocks(reader, fd) if fd is not None else _blocks(reader)


def _engine_input(item: CliInput) -> tuple[str, Any]:
    if item.reader is not None:
        return item.media_urn, _stdin_input(item.reader)
    if item.items is not None:
        return item.media_urn, list(item.items)
    return item.media_urn, item.data or b""


def _stdin_source(cap: CapDef) -> tuple[str, ArgDef] | None:
    """(stdin media URN, its argument) of the cap's first stdin-fed argument."""
    for arg in cap.args:
        for src in arg.sources:
            if isinstance(src, StdinSource):
                return src.media_urn, arg
    return None


def plan_call_inputs(
    cap: CapDef | None, args: list[str], tokens: list[str], stdin: StdinReader
) -> list[list[tuple[str, Any]]]:
    """The calls to make (usually one; one per file when a file-path argument's glob matched
    several files), each as the engine's ``[(media_urn, value), ...]``.

    :raises UsageError: an ``--arg`` names no declared argument, or the flags and positionals
        do not match the cap definition (CLI mode's own message).
    """
    declared = [a.media_urn for a in cap.args] if cap is not None else []
    given: list[tuple[str, Any]] = []
    covered: set[str] = set()
    for index, text in enumerate(args, 1):
        try:
            key, value, is_name = _split_any(text, declared)
        except ValueError as exc:
            raise UsageError(f"{exc} (argument {index})") from None
        if is_name:
            arg = next((a for a in cap.args if a.name == key), None) if cap is not None else None
            if arg is None:
                names = ", ".join(a.name for a in cap.args) if cap is not None else "unknown"
                raise UsageError(f"--arg {index}: no argument named {key!r} (arguments: {names})")
            key = arg.media_urn
            covered.add(arg.name)
        elif cap is not None:
            covered.update(a.name for a in cap.args if _covers(a, key))
        given.append((key, _value(value)))
    if cap is None:
        if tokens:
            raise UsageError("flags and positional arguments need a cap the cartridge declares")
        return [given]
    if args and not tokens:
        main = _stdin_source(cap)
        if main is not None and main[1].name not in covered and stdin.present():
            given.insert(0, (main[0], _stdin_input(stdin)))
        return [given]
    rest = attrs.evolve(
        cap, args=[a for a in cap.args if a.name not in covered], aliases=cap.aliases or cap.urn
    )
    try:
        runs = plan_invocations(rest, tokens, stdin)
    except CliUsageError as exc:
        raise UsageError(exc.message) from None
    return [[*given, *(_engine_input(item) for item in run)] for run in runs]
