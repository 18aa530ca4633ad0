"""A placement in this process: a :class:`~cartridge_runtime.runtime.CartridgeRuntime` served
over memory streams, for tests and for embedding a cartridge in a host program.

Each instance runs ``runtime.serve(receive, send)`` as a task of its connection, over two
bounded in-memory byte pipes (the same bytes a subprocess would see on its stdin and stdout,
so every frame crosses the real codec both ways). Closing its input is EOF for the runtime,
which then returns its exit status; :meth:`~._placement.Instance.kill` cancels it. An
exception out of ``serve()`` ends the instance like a crash: its calls fail with
``CARTRIDGE_DIED`` naming the exception. An instance has no stderr of its own (what the runtime
prints goes to this process's stderr).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._seam import ByteSink, Instance, LaunchError, LaunchSpec, Target

if TYPE_CHECKING:
    from ...runtime import CartridgeRuntime

__all__ = ("InProcess",)

log = logging.getLogger("cartridge_runtime.engine")

#: Blocks each memory pipe holds before a writer waits (each block is one write of the other
#: side, at most a few CHUNK frames): the pipe's share of the memory credit already bounds.
PIPE_BLOCKS = 16


@attrs.frozen
class InProcess:
    """Serve a :class:`~cartridge_runtime.runtime.CartridgeRuntime` in this process.

    The cartridge's target is then a name (a ``str``) or the runtime itself; each replica
    serves the same runtime object (its handlers must not keep per-connection state in it).

    :param runtime: the runtime to serve.
    :param check: run the runtime's setup check (``check()``) before each launch; ``False``
        serves it as it is (test hosts that call handlers the manifest does not declare).
    :raises TypeError: ``runtime`` has no ``serve()``.
    """

    runtime: CartridgeRuntime = attrs.field()
    check: bool = attrs.field(default=True, kw_only=True)

    @runtime.validator
    def _check_runtime(self, _attribute: Any, value: Any) -> None:
        if not callable(getattr(value, "serve", None)):
            raise TypeError(
                f"InProcess needs a CartridgeRuntime (with serve()), not {type(value).__name__}"
            )

    def resolve(self, target: object) -> Target:
        """:raises TypeError: the target is neither a name nor this placement's runtime."""
        manifest = getattr(self.runtime, "manifest", None)
        own = getattr(manifest, "name", None) or "cartridge"
        if target is self.runtime or target is None:
            label = str(own)
        elif isinstance(target, str) and target:
            label = target
        else:
            raise TypeError(
                "an in-process cartridge's target is a name or its runtime, "
                f"not {type(target).__name__}"
            )
        return Target(command=("<in-process>", str(own)), label=label)

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        """:raises LaunchError: the runtime refuses to start (its setup check failed)."""
        check = getattr(self.runtime, "check", None) if self.check else None
        if callable(check):
            try:
                check()
            except Exception as exc:  # SetupError, or a bug in the runtime's setup
                raise LaunchError(f"the runtime cannot start: {exc}") from exc
        instance = _MemoryInstance(self.runtime, f"in-process {spec.name}/{spec.replica}")
        task_group.start_soon(instance.serve)
        return instance


class _Sink:
    """The engine's end of the pipe to the runtime."""

    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self._stream = stream
        self.closed = False

    def write_now(self, parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
        if self.closed:
            raise anyio.ClosedResourceError
        data = b"".join(parts)
        if data:
            try:
                self._stream.send_nowait(data)
            except anyio.WouldBlock:
                return parts
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise anyio.BrokenResourceError from exc
        return []

    async def send_all(self, parts: Sequence[bytes | memoryview]) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        data = b"".join(parts)
        if data:
            try:
                await self._stream.send(data)
            except anyio.ClosedResourceError as exc:
                raise anyio.BrokenResourceError from exc

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._stream.close()


class _Receive(anyio.abc.ByteReceiveStream):
    """The runtime's input: what the engine wrote; EOF once the engine closed it."""

    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """:raises anyio.EndOfStream: the engine closed the input."""
        try:
            return await self._stream.receive()
        except anyio.ClosedResourceError:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        self._stream.close()


class _Send(anyio.abc.ByteSendStream):
    """The runtime's output: blocks for the engine's reader (copied: a writer may reuse its
    buffers once ``send`` returned)."""

    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self._stream = stream

    async def send(self, item: bytes) -> None:
        """:raises anyio.BrokenResourceError: the engine stopped reading."""
        if item:
            try:
                await self._stream.send(bytes(item))
            except anyio.ClosedResourceError as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._stream.close()


class _MemoryInstance:
    """One in-process instance behind the :class:`~._placement.Instance` interface."""

    def __init__(self, runtime: CartridgeRuntime, placement_id: str) -> None:
        self._runtime = runtime
        self._id = placement_id
        to_tx, to_rx = anyio.create_memory_object_stream[bytes](PIPE_BLOCKS)
        from_tx, from_rx = anyio.create_memory_object_stream[bytes](PIPE_BLOCKS)
        self._stdin = _Sink(to_tx)
        self._to_rx = to_rx
        self._from_tx = from_tx
        self._from = from_rx
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._returncode: int | None = None
        self._exit: str | None = None

    @property
    def placement_id(self) -> str:
        return self._id

    @property
    def pid(self) -> int | None:
        return None

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> ByteSink:
        return self._stdin

    @property
    def stderr(self) -> AsyncIterable[bytes] | None:
        return None

    async def serve(self) -> None:
        """Task body: serve the runtime until it returns, raises or is killed."""
        try:
            with self._scope:
                status = await self._runtime.serve(_Receive(self._to_rx), _Send(self._from_tx))
                self._returncode = status if isinstance(status, int) else None
                self._exit = f"exit status {status}"
        except Exception as exc:  # a bug in the cartridge: a crash, not the engine's failure
            log.warning("in-process cartridge %s crashed", self._id, exc_info=exc)
            self._exit = f"serve() raised {type(exc).__name__}: {exc}"
        finally:
            if self._exit is None:
                self._exit = "killed by the engine" if self._scope.cancel_called else "cancelled"
            self._from_tx.close()
            self._to_rx.close()
            self._done.set()

    async def read_blocks(
        self,
        size: int,
        on_data: Callable[[bytes | memoryview], None],
        next_size: Callable[[], int],
        buffer: bytearray,
    ) -> None:
        receive = self._from.receive
        while True:
            try:
                data = await receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                on_data(b"")
                return
            on_data(data)

    def kill(self) -> None:
        self._scope.cancel()

    async def wait(self) -> None:
        await self._done.wait()

    def describe_exit(self) -> str:
        return self._exit or "still running"

    async def aclose(self) -> None:
        self._stdin.close()
        self._from.close()
