"""The driver side of a Ray placement: a cartridge actor behind the
:class:`~cartridge_runtime.engine.Instance` interface.

Normally the bytes of calls go over the direct stream (:mod:`._direct`): the instance's stdin
and stdout are then the engine's ends of a socket to the cartridge's process, and the actor is
only watched (:meth:`RayInstance.watch`): its loss closes the socket, which the connection
reads as the cartridge's end. The rest of this docstring is the path through Ray, for when no
direct one exists.

Bytes to the cartridge go as :meth:`CartridgeHost.write` calls, numbered (the actor writes them
in order) and at most :data:`STDIN_WINDOW` unanswered at once: a write answers once its bytes
are in the cartridge's pipe, so a full window makes the engine's writer wait, as a full pipe
does. Each write is one round trip, which costs far more than the frames of a small call, so
writes are coalesced: the frames of every call queued while a write is unanswered go together
in the next one (see :class:`_RaySink`). Bytes from the cartridge come from a streaming
generator with at most :data:`STDOUT_BLOCKS` blocks the driver has not taken yet: past that the
actor stops reading the cartridge's stdout; each block is whatever the cartridge wrote since
the last one, the answers of several calls alike. Together with the protocol's credit this
bounds memory on both sides whatever a call's size.

The actor dying (its process killed, its node lost) ends the stdout stream with a Ray error:
that is the cartridge's EOF, and :meth:`RayInstance.describe_exit` then says the actor was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import socket
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, cast

import anyio
import anyio.abc
import ray
from ray.exceptions import GetTimeoutError, RayError

from cartridge_runtime._plumbing import FdReader

from .._placements._command import describe_returncode
from ._direct import TOKEN_BYTES, SocketSink, dial, socket_streams

__all__ = (
    "BATCH_BYTES",
    "RayInstance",
    "STDIN_WINDOW",
    "STDOUT_BLOCKS",
    "ray_reason",
    "start_actor",
)

#: Writes to the actor that may be unanswered at once (each is one batch of frames).
STDIN_WINDOW = 8
#: Bytes held for the next write while others are unanswered; a write carries about this much
#: at most, unless one buffer handed over is larger.
BATCH_BYTES = 1 << 20
#: Seconds a killed instance's actor may take to report the cartridge's end before the actor
#: itself is killed (a hung actor, or a lost node Ray has not declared dead yet).
KILL_WAIT = 5.0
#: Blocks of the cartridge's stdout the actor may produce before the driver took them.
STDOUT_BLOCKS = 8


def ray_reason(exc: BaseException) -> str:
    """A one-line reason for a Ray failure (the cause of a task error, else the first line)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return f"{type(cause).__name__}: {cause}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class _RaySink:
    """The engine's writing end: numbered writes to the actor, coalesced, in a bounded window.

    Bytes handed over while a write is unanswered are held, not sent at once: they go as one
    write when an answer comes back (or once they reach :data:`BATCH_BYTES`), so the frames of
    many calls in flight to one actor share a round trip instead of paying one each. A write
    with nothing unanswered goes at once, so a lone call waits for nothing. At most
    :data:`STDIN_WINDOW` writes are unanswered and :data:`BATCH_BYTES` held; past that,
    :meth:`write_now` hands the bytes back and :meth:`send_all` waits, as a full pipe does.
    Held bytes always have an unanswered write behind them, whose answer sends them.
    """

    def __init__(self, actor: Any) -> None:
        self._actor = actor
        self._seq = 0
        self._in_flight = 0
        self._held: list[bytes | memoryview] = []
        self._held_size = 0
        self._room: anyio.Event | None = None
        self._broken: str | None = None
        self.closed = False
        #: Writes sent to the actor (each one round trip), for tests and benchmarks.
        self.writes = 0

    def _check(self) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        if self._broken is not None:
            raise anyio.BrokenResourceError(self._broken)

    def _full(self) -> bool:
        return self._in_flight >= STDIN_WINDOW and self._held_size >= BATCH_BYTES

    def _take(self, parts: Sequence[bytes | memoryview]) -> None:
        """Hold ``parts`` (the caller lets go of them), then send what is due."""
        for part in parts:
            self._held_size += len(part)
        self._held.extend(parts)
        self._pump()

    def _pump(self) -> None:
        """Send the held bytes as one write when nothing is unanswered, or when they reached
        :data:`BATCH_BYTES` and the window has room."""
        if not self._held_size or self._broken is not None:
            return
        if self._in_flight and (self._held_size < BATCH_BYTES or self._in_flight >= STDIN_WINDOW):
            return
        self._submit()

    def _submit(self) -> None:
        """Send the held bytes as one write (a lone ``bytes`` buffer as it is)."""
        held, self._held, self._held_size = self._held, [], 0
        data = held[0] if len(held) == 1 and isinstance(held[0], bytes) else b"".join(held)
        ref = self._actor.write.remote(self._seq, data)
        self._seq += 1
        self._in_flight += 1
        self.writes += 1
        future = asyncio.wrap_future(ref.future())
        future.add_done_callback(self._answered)

    def _answered(self, future: asyncio.Future[Any]) -> None:
        self._in_flight -= 1
        if future.cancelled():
            self._broken = self._broken or "the write was cancelled"
        elif future.exception() is not None:
            exc = future.exception()
            assert exc is not None
            self._broken = (
                self._broken or f"the cartridge's actor stopped taking input: {ray_reason(exc)}"
            )
        if self._broken is not None:
            self._held, self._held_size = [], 0  # the actor takes no more input
        else:
            self._pump()
        if self._room is not None:
            self._room.set()
            self._room = None

    def write_now(self, parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
        self._check()
        if self._full():
            return parts
        self._take(parts)
        return []

    async def send_all(self, parts: Sequence[bytes | memoryview]) -> None:
        self._check()
        while self._full():
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()
            self._check()
        self._take(parts)

    def close(self) -> None:
        """End the cartridge's input once the held bytes are sent."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(RayError):
                if self._held_size and self._broken is None:
                    self._submit()
                self._actor.close_stdin.remote(self._seq)
            self._seq += 1


class _RayStdout(anyio.abc.ByteReceiveStream):
    """The cartridge's stdout as a byte stream: the blocks of the actor's streaming generator,
    started by the first read (whose size asks the actor for its block size). The generator's
    end, or a Ray error (the actor was lost: the instance notes why), is the end of the stream.
    """

    def __init__(self, instance: RayInstance) -> None:
        self._instance = instance
        self._stream: Any = None
        self._ended = False

    async def receive(self, max_bytes: int = 1 << 20) -> bytes:
        """The next block the cartridge wrote (whole, whatever ``max_bytes`` asks).

        :raises anyio.EndOfStream: the cartridge's output ended, or its actor was lost.
        """
        if self._ended:
            raise anyio.EndOfStream
        instance = self._instance
        stream = self._stream
        if stream is None:
            stream = self._stream = instance.open_stdout(max_bytes)
        try:
            ref = await stream.__anext__()
            data = instance.take_ready(ref)
            if data is None:
                data = await ref
        except StopAsyncIteration:
            self._ended = True
            raise anyio.EndOfStream from None
        except RayError as exc:
            self._ended = True
            instance.lose(exc)
            raise anyio.EndOfStream from None
        instance.blocks += 1
        return cast(bytes, data)

    async def aclose(self) -> None:
        self._ended = True


class RayInstance:
    """One cartridge in a Ray actor, as a connection drives it.

    :param actor: the actor's handle (a :class:`~._host.CartridgeHost` actor that started
        the cartridge).
    :param where: what its ``start()`` answered.
    :param kill_actor: ends the actor (``ray.kill``; a test's fake backend passes its own).
    :param take_ready: a block's bytes if they are already here, else ``None`` (``ray.get``
        without waiting; a fake backend passes its own).
    :param on_end: called once when the instance is closed (its resources are free again).
    :param direct: the engine's ends of the direct stream (stdin, stdout), when the cartridge
        runs on it (then :meth:`watch` must run while the instance lives); ``None``: the bytes
        go through the actor.
    """

    def __init__(
        self,
        actor: Any,
        where: dict[str, Any],
        *,
        kill_actor: Callable[[Any], None] | None = None,
        take_ready: Callable[[Any], bytes | None] | None = None,
        on_end: Callable[[], None] | None = None,
        direct: tuple[SocketSink, FdReader] | None = None,
    ) -> None:
        self._actor = actor
        self._on_end = on_end
        self._kill_actor = kill_actor or _ray_kill
        self._take_ready = take_ready or _take_ready
        self._where = where
        self._stdin: _RaySink | SocketSink
        self._stdout: anyio.abc.ByteReceiveStream
        if direct is None:
            self._stdin, self._stdout = _RaySink(actor), _RayStdout(self)
        else:
            self._stdin, self._stdout = direct
        self._direct = direct
        self._returncode: int | None = None
        self._lost: str | None = None
        self._ended = False
        self._killed = False
        #: Blocks of the cartridge's stdout taken from the actor (each one generator item).
        self.blocks = 0
        actor_id = actor._actor_id.hex()[:12]
        node = str(where.get("node", ""))[:8]
        over = f"over a {where['path']} socket" if direct is not None else "through ray"
        self._id = f"ray actor {actor_id} on node {node} (pid {where.get('pid')}, {over})"

    @property
    def placement_id(self) -> str:
        return self._id

    @property
    def pid(self) -> int | None:
        return None  # a process on a Ray node, not one of this host's (see placement_id)

    @property
    def remote_pid(self) -> int | None:
        """The cartridge's process id on its node."""
        pid = self._where.get("pid")
        return pid if isinstance(pid, int) else None

    @property
    def node_id(self) -> str:
        """The id of the Ray node the actor and the cartridge run on (hex)."""
        return str(self._where.get("node", ""))

    @property
    def actor_pid(self) -> int | None:
        """The process id of the actor that owns the cartridge, on the same node."""
        pid = self._where.get("actor_pid")
        return pid if isinstance(pid, int) else None

    @property
    def path(self) -> str:
        """How the bytes of calls travel: ``"unix"`` or ``"tcp"`` (the direct stream), or
        ``"ray"`` (the actor's calls and Ray's object store)."""
        return str(self._where.get("path", "ray")) if self._direct is not None else "ray"

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> _RaySink | SocketSink:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> AsyncIterable[bytes] | None:
        return self._stderr_blocks()

    async def _stderr_blocks(self) -> AsyncIterator[bytes]:
        stream = self._actor.stderr.options(
            num_returns="streaming", _generator_backpressure_num_objects=STDOUT_BLOCKS
        ).remote()
        try:
            async for ref in stream:
                yield await ref
        except RayError:
            return  # the actor was lost; the stdout reader reports it

    def open_stdout(self, size: int) -> Any:
        """Start the actor's stdout generator (blocks of at most ``size`` bytes)."""
        return self._actor.stdout.options(
            num_returns="streaming", _generator_backpressure_num_objects=STDOUT_BLOCKS
        ).remote(size)

    def take_ready(self, ref: Any) -> bytes | None:
        """A block's bytes if they are already here, else ``None``."""
        return self._take_ready(ref)

    def lose(self, exc: BaseException) -> None:
        """The actor was lost (a Ray error): remember why, unless it had ended."""
        if self._lost is None and not self._ended:
            self._lost = f"its Ray actor was lost ({ray_reason(exc)})"

    async def watch(self) -> None:
        """Watch the actor while the cartridge runs on the direct stream: if the actor is lost
        (killed, its node gone), note why and shut the socket down, so the connection sees the
        end as it would a local process's (no reader waits on a socket whose far end nobody
        will close) and the cartridge, if it still runs, reads EOF. Returns when the cartridge
        ended."""
        try:
            await self._actor.wait.remote()
        except RayError as exc:
            self.lose(exc)
            if self._direct is not None:
                self._direct[0].abort()

    def kill(self) -> None:
        if not self._ended:
            self._killed = True
            with contextlib.suppress(RayError):
                self._actor.kill.remote()

    async def wait(self) -> None:
        if self._ended:
            return
        try:
            # After a kill the actor answers at once, unless it hangs or its node is gone
            # and Ray has not noticed yet: then the actor itself is killed.
            with anyio.move_on_after(KILL_WAIT if self._killed else math.inf) as scope:
                self._returncode = await self._actor.wait.remote()
            if scope.cancelled_caught:
                self._lost = f"its Ray actor did not answer a kill within {KILL_WAIT:g} s"
                self._kill_actor(self._actor)
        except RayError as exc:
            self.lose(exc)
        self._ended = True

    def describe_exit(self) -> str:
        if self._lost is not None:
            return self._lost
        if not self._ended:
            return "still running"
        return describe_returncode(self._returncode)

    async def resident_memory(self) -> int | None:
        """The resident memory of the cartridge's process tree on its node, bytes, as its
        actor reads it (``None``: no figure); what the engine's memory guard samples."""
        if self._ended:
            return None
        try:
            value = await self._actor.resident.remote()
        except RayError:
            return None
        return value if isinstance(value, int) else None

    async def limit_address_space(self, limit: int) -> bool:
        """Set the cartridge's ``RLIMIT_AS`` on its node; whether that was allowed."""
        try:
            return bool(await self._actor.limit_address_space.remote(limit))
        except RayError:
            return False

    async def aclose(self) -> None:
        if self._on_end is not None:
            self._on_end()
            self._on_end = None
        if self._direct is None:
            self._stdin.closed = True
        else:
            for end in self._direct:
                end.close()
        # The process ended: free the actor (and the resources it holds on its node).
        self._kill_actor(self._actor)


async def start_actor(
    actor: Any, command: list[str], env: Mapping[str, str] | None, *, direct: bool
) -> tuple[dict[str, Any], tuple[SocketSink, FdReader] | None]:
    """Start the cartridge in ``actor``: on the direct stream when ``direct`` and the engine
    reaches one of the actor's sockets, else on pipes the actor relays. Returns what the
    actor's ``start`` answered (with ``path``: how the bytes travel) and the engine's ends of
    the direct stream, if any.

    :raises RayError: the actor failed (it could not start the program, or it was lost).
    """
    sock = None
    token = None
    if direct:
        addresses = await actor.listen.remote()
        token = secrets.token_bytes(TOKEN_BYTES)
        sock = await dial(addresses, token)
        if sock is None:
            token = None
    try:
        where: dict[str, Any] = await actor.start.remote(command, env, token, _niceness())
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    if sock is None:
        where["path"] = "ray"
        return where, None
    where["path"] = "unix" if sock.family == socket.AF_UNIX else "tcp"
    return where, socket_streams(sock)


def _niceness() -> int | None:
    """This process's niceness, which its cartridges on Ray get back where their node allows
    (``None``: no figure on this platform)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        return None


def _take_ready(ref: Any) -> bytes | None:
    """A block's bytes if they are already in this process (a small block comes inline with
    the stream's report, a large one once fetched), else ``None``: taking them without an
    ``await`` saves a hop through Ray's thread per block."""
    try:
        data = ray.get(ref, timeout=0)
    except GetTimeoutError:
        return None
    return cast(bytes, data)


def _ray_kill(actor: Any) -> None:
    """End an actor for good (no restart); no-op when it is already gone."""
    with contextlib.suppress(RayError, ValueError):
        ray.kill(actor, no_restart=True)
