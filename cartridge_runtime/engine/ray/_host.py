"""The actor side of a Ray placement: one cartridge subprocess, owned on the actor's node.

:class:`CartridgeHost` is a plain class; :mod:`._placement` turns it into a Ray actor class
(``ray.remote(CartridgeHost)``) run by a pool of :data:`THREADS` threads: each method is plain
blocking code (a pipe write, a pipe read, a ``waitpid``) in a thread of its own. A threaded
actor costs Ray about half the CPU per call of an asyncio one (no hop into an event loop and
back), and without a direct stream every write and every block of output is such a call. It
never reads a frame: the engine on the driver keeps the whole connection (frames, credit,
routing).

* :meth:`CartridgeHost.listen` opens the direct stream's sockets (:mod:`._direct`) and
  :meth:`CartridgeHost.start` with the engine's token starts the cartridge on the connection
  that presents it: the cartridge's stdin and stdout are then that socket and the engine reads
  and writes it itself; the methods below that move bytes are for when no direct path exists.
* :meth:`CartridgeHost.write` takes the engine's writes by sequence number, because two
  threads may start two calls out of order; each returns once its bytes are in the pipe, so a
  bounded number of unanswered writes on the driver bounds the bytes between the two.
* :meth:`CartridgeHost.stdout` and :meth:`CartridgeHost.stderr` are generators, called as
  Ray streaming generators: Ray's backpressure (a bound on the blocks the driver has not read
  yet) pauses them, and with them the cartridge, once the driver stops reading.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cartridge_runtime._plumbing import grow_pipe
from cartridge_runtime.engine._supervision._memory import resident_bytes, set_address_limit

from ._direct import Listener

__all__ = ("THREADS", "CartridgeHost")

#: Threads of the actor: the output and error streams and ``wait`` hold one each for the
#: cartridge's life, unanswered writes (at most the driver's window) one each while they wait
#: for their turn or for room in the pipe.
THREADS = 16
#: Largest block read from the cartridge's stderr at once.
_STDERR_BLOCK = 1 << 16


class CartridgeHost:
    """One cartridge subprocess on a Ray node (see the module docstring)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._turn = threading.Condition()
        self._next_seq = 0
        self._stdin_open = True
        self._listener: Listener | None = None

    def listen(self) -> dict[str, Any]:
        """Open the direct stream's sockets (a Unix socket on this host, a TCP socket on the
        node's address); returns where they are (see :meth:`Listener.addresses`).

        :raises OSError: no socket could be opened.
        """
        if self._listener is None:
            self._listener = Listener(_node_address())
        return self._listener.addresses()

    def start(
        self,
        command: list[str],
        env: Mapping[str, str] | None,
        token: bytes | None = None,
        niceness: int | None = None,
    ) -> dict[str, Any]:
        """Spawn the cartridge; returns where it runs (its ``pid``, the ``actor_pid``, the
        ``node`` id, the ``host`` name and the ``niceness`` it runs at).

        With ``token`` its stdin and stdout are the connection to :meth:`listen`'s sockets
        that presents it (the direct stream); without, pipes this actor reads and writes.
        With ``niceness`` (the engine's), the cartridge is put back to it where the node
        allows: Ray starts its workers, and so their children, at a low priority (nice 15),
        which on a busy node leaves the process doing the calls' work behind every other one.

        :raises OSError: the program cannot be started (the OS error's words).
        :raises TimeoutError: with ``token``, the engine's connection did not come.
        """
        listener, self._listener = self._listener, None
        try:
            if token is not None:
                if listener is None:
                    raise RuntimeError("start with a token needs listen() first")
                with listener.accept(token) as conn:
                    self._proc = subprocess.Popen(
                        command,
                        stdin=conn.fileno(),
                        stdout=conn.fileno(),
                        stderr=subprocess.PIPE,
                        env=dict(env) if env is not None else None,
                        bufsize=0,
                    )
            else:
                self._proc = self._spawn_piped(command, env)
        finally:
            if listener is not None:
                listener.close()
        return {
            "pid": self._proc.pid,
            "actor_pid": os.getpid(),
            "node": _node_id(),
            "host": os.uname().nodename,
            "niceness": _renice(self._proc.pid, niceness),
        }

    @staticmethod
    def _spawn_piped(command: list[str], env: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            bufsize=0,
        )
        # As the local placement does: a 256 KiB CHUNK crosses in one read, and each block
        # sent to the driver is one large object instead of many 64 KiB ones.
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                grow_pipe(pipe.fileno())
        return proc

    def _process(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the cartridge was not started")
        return self._proc

    def _wait_turn(self, seq: int) -> None:
        self._turn.wait_for(lambda: self._next_seq == seq)

    def _next_turn(self) -> None:
        self._next_seq += 1
        self._turn.notify_all()

    def write(self, seq: int, data: bytes) -> None:
        """Write ``data`` after every write numbered before ``seq``; return once it is in the
        pipe.

        :raises BrokenPipeError: the cartridge stopped reading.
        """
        stdin = self._process().stdin
        assert stdin is not None
        with self._turn:
            self._wait_turn(seq)
            try:
                if not self._stdin_open:
                    raise BrokenPipeError("the cartridge's stdin is closed")
                view = memoryview(data)
                while view:
                    view = view[os.write(stdin.fileno(), view) :]
            except ConnectionResetError as exc:
                raise BrokenPipeError(str(exc)) from exc
            finally:
                self._next_turn()

    def close_stdin(self, seq: int) -> None:
        """End the cartridge's input after every write numbered before ``seq``."""
        stdin = self._process().stdin
        with self._turn:
            self._wait_turn(seq)
            self._next_turn()
            if self._stdin_open and stdin is not None:
                self._stdin_open = False
                stdin.close()

    def stdout(self, size: int) -> Iterator[bytes]:
        """Every block the cartridge writes on stdout (whatever the pipe holds, up to
        ``size``), until it closes it."""
        reader = self._process().stdout
        assert reader is not None
        yield from _blocks(reader.fileno(), size)

    def stderr(self) -> Iterator[bytes]:
        """Every block the cartridge writes on stderr, until it closes it."""
        reader = self._process().stderr
        assert reader is not None
        yield from _blocks(reader.fileno(), _STDERR_BLOCK)

    def kill(self) -> None:
        """Kill the cartridge now (no-op once it ended)."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)

    def wait(self) -> int:
        """Wait for the cartridge's end; its exit status (negative: killed by that signal)."""
        return self._process().wait()

    def resident(self) -> int | None:
        """The resident memory of the cartridge's process tree on this node, bytes (``None``:
        it ended, or the node has no source of figures)."""
        proc = self._proc
        # poll() reaps a process that exited: a zombie would read as 0 bytes, not as ended.
        if proc is None or proc.poll() is not None:
            return None
        return resident_bytes(proc.pid)

    def limit_address_space(self, limit: int) -> bool:
        """Set the cartridge's ``RLIMIT_AS`` (Linux nodes); whether that was allowed."""
        proc = self._proc
        return proc is not None and set_address_limit(proc.pid, limit)


def _blocks(fd: int, size: int) -> Iterator[bytes]:
    while True:
        data = os.read(fd, size)
        if not data:
            return
        yield data


def _renice(pid: int, niceness: int | None) -> int | None:
    """Set ``pid``'s niceness to ``niceness`` where allowed (lowering it needs the privilege
    to); returns the niceness it runs at (``None``: no figure on this platform)."""
    try:
        if niceness is not None and os.getpriority(os.PRIO_PROCESS, pid) != niceness:
            with contextlib.suppress(PermissionError):
                os.setpriority(os.PRIO_PROCESS, pid, niceness)
        return os.getpriority(os.PRIO_PROCESS, pid)
    except (AttributeError, OSError):
        return None


def _node_address() -> str | None:
    """This node's address for the direct stream's TCP socket (``None`` outside Ray: a plain
    object in a test offers its Unix socket only)."""
    import ray

    if not ray.is_initialized():
        return None
    # Untyped in Ray: this node's address as the cluster knows it.
    address: Callable[[], str] = ray.util.get_node_ip_address
    return str(address())


def _node_id() -> str:
    """The Ray node this actor runs on (``""`` outside Ray: a plain object in a test, where
    asking Ray would start a local instance)."""
    import ray

    if not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())
