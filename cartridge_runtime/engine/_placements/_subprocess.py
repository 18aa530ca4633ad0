"""The default placement: each instance is a local subprocess speaking over pipes.

The engine makes the pipes itself (:func:`~cartridge_runtime._plumbing.make_pipe`, enlarged
where the OS allows) and reads and writes their raw file descriptors: see
:mod:`cartridge_runtime._plumbing._fd` for why (gathering writes, one reader callback per pipe on asyncio).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import AsyncIterable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import attrs

from cartridge_runtime._plumbing import FdReader, FdWriter, make_pipe, read_blocks

from ._command import command_for, describe_returncode
from ._seam import ByteSink, Instance, LaunchError, LaunchSpec, Target

__all__ = ("Subprocess",)


@attrs.frozen
class Subprocess:
    """Run each instance as a local subprocess (the default placement).

    The target is a ``.py`` script (run with this interpreter), an executable, or a command
    list; no arguments are added (no arguments means CBOR mode).
    """

    def resolve(self, target: object) -> Target:
        """:raises CartridgeNotFound: the script or program does not exist.
        :raises TypeError: the target is not a path or a command list.
        :raises ValueError: an empty command list."""
        if isinstance(target, str | os.PathLike):
            command = command_for(target)
            return Target(command=tuple(command), label=Path(command[-1]).stem or "cartridge")
        if isinstance(target, Sequence) and not isinstance(target, str | bytes):
            command = command_for(target)
            return Target(command=tuple(command), label=Path(command[0]).stem or "cartridge")
        raise TypeError(
            "a subprocess cartridge is a script, a program or a command list, "
            f"not {type(target).__name__}"
        )

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        """:raises LaunchError: the program cannot be started (the OS error's words)."""
        in_r, in_w = make_pipe()
        out_r, out_w = make_pipe()
        try:
            process = await anyio.open_process(
                list(spec.target.command),
                stdin=in_r,
                stdout=out_w,
                stderr=subprocess.PIPE,
                env=dict(spec.env) if spec.env is not None else None,
            )
        except OSError as exc:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise LaunchError(str(exc)) from exc
        except BaseException:  # cancelled while spawning (a timeout)
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise
        os.close(in_r)
        os.close(out_w)
        return _ProcessInstance(process, FdWriter(in_w), FdReader(out_r))


class _ProcessInstance:
    """A local subprocess behind the :class:`~._placement.Instance` interface."""

    def __init__(self, process: anyio.abc.Process, stdin: FdWriter, stdout: FdReader) -> None:
        self._process = process
        self._stdin = stdin
        self._stdout = stdout

    @property
    def placement_id(self) -> str:
        return f"pid {self._process.pid}"

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def stdin(self) -> ByteSink:
        return self._stdin

    @property
    def stderr(self) -> AsyncIterable[bytes] | None:
        return self._process.stderr

    async def read_blocks(
        self,
        size: int,
        on_data: Callable[[bytes | memoryview], None],
        next_size: Callable[[], int],
        buffer: bytearray,
    ) -> None:
        await read_blocks(self._stdout, size, on_data, next_size, buffer)

    def kill(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    async def wait(self) -> None:
        await self._process.wait()

    def describe_exit(self) -> str:
        return describe_returncode(self._process.returncode)

    async def aclose(self) -> None:
        self._stdin.close()
        self._stdout.close()
        if self._process.stderr is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await self._process.stderr.aclose()
