"""The placement through which the engine takes a cartridge started early (:mod:`._early`).

:class:`EarlyPlacement` is the default placement (:class:`~cartridge_runtime.engine.Subprocess`)
with one difference: its first launch of the cartridge's first replica, when the engine's
command for the target is the one the early process runs, hands that process over instead of
starting another. Every other launch (a respawn, a replica, another command) starts a process
as the default placement does. The process handed over is driven through the same pipes the
engine's own spawn makes (:class:`~cartridge_runtime._plumbing.FdWriter`,
:class:`~cartridge_runtime._plumbing.FdReader`); its end is awaited on its pidfd, so no thread
waits for it (where the OS has none, it is looked for every few milliseconds: the engine
waits for a process's end only once it closed its stdin or killed it).
"""

from __future__ import annotations

import contextlib
import os
import signal

import anyio
import anyio.abc

from .._plumbing import FdReader, FdWriter
from ..engine import Instance, LaunchSpec, Subprocess, Target
from ._early import EarlyProcess

__all__ = ("EarlyPlacement",)

#: Seconds between two looks at a process's end where the OS gives no pidfd.
_POLL_S = 0.005


class EarlyPlacement:
    """Launches like :class:`~cartridge_runtime.engine.Subprocess`, the first time with the
    early process (see the module docstring)."""

    def __init__(self, early: EarlyProcess) -> None:
        self._early = early
        self._default = Subprocess()

    def __repr__(self) -> str:
        return f"EarlyPlacement({self._early!r})"

    def resolve(self, target: object) -> Target:
        return self._default.resolve(target)

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        early = self._early
        if (
            not early.taken
            and spec.replica == 0
            and spec.env is None
            and tuple(spec.target.command) == early.command
        ):
            early.taken = True
            return _EarlyInstance(early)
        early.discard()  # not the process this launch asks for
        return await self._default.launch(spec, task_group)


def _describe(code: int | None) -> str:
    """How a process ended, in the engine's words for its own processes."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


class _EarlyInstance:
    """An early process behind the engine's instance interface."""

    def __init__(self, early: EarlyProcess) -> None:
        self._pid = early.pid
        self._pidfd = early.pidfd
        self._stdin = FdWriter(early.stdin)
        self._stdout = FdReader(early.stdout)
        self._stderr = FdReader(early.stderr)
        self._returncode: int | None = None
        self._waiting = anyio.Lock()

    def __repr__(self) -> str:
        return f"_EarlyInstance(pid={self._pid}, returncode={self._returncode})"

    @property
    def placement_id(self) -> str:
        return f"pid {self._pid}"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._poll()

    @property
    def stdin(self) -> FdWriter:
        return self._stdin

    @property
    def stdout(self) -> FdReader:
        return self._stdout

    @property
    def stderr(self) -> FdReader:
        return self._stderr

    def _poll(self) -> int | None:
        """The exit status once the process ended (reaped here, the one place that reaps it)."""
        if self._returncode is None:
            try:
                pid, status = os.waitpid(self._pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self._returncode = os.waitstatus_to_exitcode(status)
        return self._returncode

    def kill(self) -> None:
        if self._poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)

    async def wait(self) -> None:
        # One waiter on the pidfd at a time (a descriptor takes one reader); the others
        # queue on the lock and find the status set.
        async with self._waiting:
            while self._poll() is None:
                if self._pidfd >= 0:
                    await anyio.wait_readable(self._pidfd)
                else:  # no pidfd on this OS; the engine waits only once it closed stdin
                    await anyio.sleep(_POLL_S)

    def describe_exit(self) -> str:
        return _describe(self._poll())

    async def aclose(self) -> None:
        self._stdin.close()
        self._stdout.close()
        self._stderr.close()
        if self._poll() is not None and self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
