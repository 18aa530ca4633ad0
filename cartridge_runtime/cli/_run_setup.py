"""What ``cartridge run``'s options turn into: inputs, where each value goes, the step cache.

Pure decisions plus small file helpers, so that ``run_cmd`` keeps to running and reporting.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import anyio.to_thread

from ..engine import CacheStore, list_runs, machine_digest
from ..engine import default_step_cache_dir as default_cache_dir
from ._terminal import BINARY_ON_TERMINAL, looks_binary
from ._usage import UsageError

__all__ = ("Usage", "parse_inputs", "parse_targets", "Sinks", "choose_cache", "stdin_pieces")

#: Bytes per read of an input given on stdin.
STDIN_PIECE = 1 << 20


#: The command's one usage error, by the name this module's callers use.
Usage = UsageError


async def stdin_pieces() -> AsyncIterator[bytes]:
    """Standard input, streamed in pieces (read in a worker thread)."""
    read = getattr(sys.stdin.buffer, "read1", sys.stdin.buffer.read)
    while block := await anyio.to_thread.run_sync(read, STDIN_PIECE):
        yield block


def parse_inputs(given: list[str]) -> dict[str, Any]:
    """``NAME=TEXT``, ``NAME=@PATH`` or ``NAME=@-`` (standard input, once) by node name.

    :raises Usage: a malformed or repeated input, a missing file, stdin twice.
    """
    inputs: dict[str, Any] = {}
    from_stdin = False
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise Usage(f"--input {text!r}: expected NAME=VALUE, NAME=@PATH or NAME=@-")
        if name in inputs:
            raise Usage(f"--input {name!r} is given twice")
        if value == "@-":
            if from_stdin:
                raise Usage("only one --input may read standard input (@-)")
            from_stdin = True
            inputs[name] = stdin_pieces()
        elif value.startswith("@"):
            path = Path(value[1:])
            if not path.is_file():
                raise Usage(f"--input {name}: no file at {path}")
            inputs[name] = path
        else:
            inputs[name] = value.encode("utf-8")
    return inputs


def parse_targets(given: list[str]) -> dict[str, Path]:
    """``--output NAME=FILE`` by node name.

    :raises Usage: malformed or repeated.
    """
    targets: dict[str, Path] = {}
    for text in given:
        name, sep, file = text.partition("=")
        if not sep or not name or not file:
            raise Usage(f"--output {text!r}: expected NAME=FILE")
        if name in targets:
            raise Usage(f"--output {name!r} is given twice")
        targets[name] = Path(file)
    return targets


def choose_cache(
    text: str, runs_dir: Path, cache: Path | None, resume: bool, no_cache: bool
) -> CacheStore | None:
    """The run's step cache: ``--cache DIR`` (look up and store), ``--resume`` (the cache the
    last run of this machine used, else the default one; look up and store), ``--no-cache``
    (none), or by default the default cache, stored into but never looked up.

    :raises Usage: contradictory options.
    :raises CacheError: the folder cannot be used.
    """
    if no_cache and (cache is not None or resume):
        raise Usage("--no-cache contradicts --cache and --resume")
    if no_cache:
        return None
    if cache is not None:
        return CacheStore(cache)
    if resume:
        digest = machine_digest(text)
        last = next((r for r in list_runs(runs_dir) if r.facts.get("machine_sha256") == digest),
                    None)  # fmt: skip
        used = last.facts.get("cache") if last is not None else None
        return CacheStore(Path(used) if used else default_cache_dir())
    return CacheStore(default_cache_dir(), lookup=False)


def _bytes_of(value: Any, is_item: bool) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        data = json.dumps(value, default=repr).encode("utf-8")
    return data + b"\n" if is_item else data


class Sinks:
    """Where each value goes: a file (written to a temporary name beside it, ``.NAME.PID.*``,
    renamed at the end; one left by a process killed outright is removed by the next run), or
    stdout for the one output of a run with no other place for it."""

    def __init__(self, files: dict[str, Path], stdout: str | None) -> None:
        self.stdout_name = stdout
        self.files: dict[str, tuple[IO[bytes], Path, Path]] = {}
        self.written: dict[str, int] = {}
        self.stdout = sys.stdout.buffer
        self._judge = stdout is not None and sys.stdout.isatty()  # binary is refused there
        for name, final in files.items():
            final.parent.mkdir(parents=True, exist_ok=True)
            _sweep(final)
            handle, temp = tempfile.mkstemp(
                prefix=f".{final.name}.{os.getpid()}.", dir=final.parent
            )
            os.fchmod(handle, 0o666 & ~_umask())  # as open() would have made it
            self.files[name] = (os.fdopen(handle, "wb"), Path(temp), final)

    def write(self, name: str, value: Any, is_item: bool) -> None:
        data = _bytes_of(value, is_item)
        self.written[name] = self.written.get(name, 0) + len(data)
        if name in self.files:
            self.files[name][0].write(data)
        elif name == self.stdout_name:
            if self._judge and data:
                self._judge = False
                if looks_binary(data):
                    raise UsageError(BINARY_ON_TERMINAL)
            self.stdout.write(data)
            self.stdout.flush()

    def commit(self, absent: tuple[str, ...]) -> dict[str, str]:
        paths = {}
        for name, (handle, temp, final) in self.files.items():
            handle.close()
            if name in absent:
                temp.unlink()
                continue
            temp.replace(final)
            paths[name] = str(final)
        return paths

    def discard(self) -> None:
        for handle, temp, _ in self.files.values():
            handle.close()
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()


def _sweep(final: Path) -> None:
    """Remove the temporary files a run killed outright (SIGKILL: no chance to clean up) left
    beside ``final``: ``.NAME.PID.*`` of a process that no longer exists."""
    prefix = f".{final.name}."
    with contextlib.suppress(OSError):
        for leftover in final.parent.iterdir():
            pid = leftover.name[len(prefix) :].split(".", 1)[0]
            if leftover.name.startswith(prefix) and pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    leftover.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's
    return True


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
