"""The actor side of a Ray placement: one cartridge subprocess, owned on the actor's node.

:class:`CartridgeHost` is a plain class; :mod:`._placement` turns it into a Ray actor class
(``ray.remote(CartridgeHost)``), and every method runs on the actor's asyncio loop. It only
moves bytes: the engine on the driver keeps the whole connection (frames, credit, routing).

* :meth:`CartridgeHost.write` takes the engine's writes by sequence number, because an async
  actor may start two calls out of order; each returns once its bytes are in the pipe, so a
  bounded number of unanswered writes on the driver bounds the bytes between the two.
* :meth:`CartridgeHost.stdout` and :meth:`CartridgeHost.stderr` are async generators, called
  as Ray streaming generators: Ray's backpressure (a bound on the blocks the driver has not
  read yet) pauses them, and with them the cartridge, once the driver stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from typing import Any

from cartridge_runtime._plumbing import grow_pipe

__all__ = ("CartridgeHost",)

#: Largest block read from the cartridge's stderr at once.
_STDERR_BLOCK = 1 << 16
#: The pipe buffer of the cartridge's stdout on the actor's side (asyncio's reader limit).
_STDOUT_LIMIT = 1 << 20


class CartridgeHost:
    """One cartridge subprocess on a Ray node (see the module docstring)."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Condition()
        self._next_seq = 0

    async def start(self, command: list[str], env: Mapping[str, str] | None) -> dict[str, Any]:
        """Spawn the cartridge; returns where it runs (its ``pid``, the ``actor_pid``, the
        ``node`` id and the ``host`` name).

        :raises OSError: the program cannot be started (the OS error's words).
        """
        self._proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            limit=_STDOUT_LIMIT,
        )
        _grow_pipes(self._proc)
        return {
            "pid": self._proc.pid,
            "actor_pid": os.getpid(),
            "node": _node_id(),
            "host": os.uname().nodename,
        }

    def _process(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            raise RuntimeError("the cartridge was not started")
        return self._proc

    async def write(self, seq: int, data: bytes) -> None:
        """Write ``data`` after every write numbered before ``seq``; return once it is in the
        pipe.

        :raises BrokenPipeError: the cartridge stopped reading.
        """
        proc = self._process()
        async with self._turn:
            await self._turn.wait_for(lambda: self._next_seq == seq)
            try:
                stdin = proc.stdin
                if stdin is None or stdin.is_closing():
                    raise BrokenPipeError("the cartridge's stdin is closed")
                stdin.write(data)
                await stdin.drain()
            except ConnectionResetError as exc:
                raise BrokenPipeError(str(exc)) from exc
            finally:
                self._next_seq += 1
                self._turn.notify_all()

    async def close_stdin(self, seq: int) -> None:
        """End the cartridge's input after every write numbered before ``seq``."""
        proc = self._process()
        async with self._turn:
            await self._turn.wait_for(lambda: self._next_seq == seq)
            self._next_seq += 1
            self._turn.notify_all()
            if proc.stdin is not None:
                proc.stdin.close()

    async def stdout(self, size: int) -> AsyncIterator[bytes]:
        """Every block the cartridge writes on stdout, until it closes it."""
        reader = self._process().stdout
        assert reader is not None
        while True:
            data = await reader.read(size)
            if not data:
                return
            yield data

    async def stderr(self) -> AsyncIterator[bytes]:
        """Every block the cartridge writes on stderr, until it closes it."""
        reader = self._process().stderr
        assert reader is not None
        while True:
            data = await reader.read(_STDERR_BLOCK)
            if not data:
                return
            yield data

    def kill(self) -> None:
        """Kill the cartridge now (no-op once it ended)."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """Wait for the cartridge's end; its exit status (negative: killed by that signal)."""
        return await self._process().wait()


def _grow_pipes(proc: asyncio.subprocess.Process) -> None:
    """Enlarge the cartridge's stdin and stdout pipes where the OS allows (as the local
    placement does): a 256 KiB CHUNK then crosses in one read, and each block sent to the
    driver is one large object instead of many 64 KiB ones."""
    transport = getattr(proc, "_transport", None)
    for fd in (0, 1):
        pipe = transport.get_pipe_transport(fd) if transport is not None else None
        end = pipe.get_extra_info("pipe") if pipe is not None else None
        if end is not None:
            grow_pipe(end.fileno())


def _node_id() -> str:
    """The Ray node this actor runs on (``""`` outside Ray)."""
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # not in a Ray worker: a plain object in a test
        return ""
