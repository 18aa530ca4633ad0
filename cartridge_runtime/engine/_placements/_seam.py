"""Where a cartridge runs: the placement seam between the engine and a cartridge instance.

A *placement* is a value given to :meth:`Engine.add_cartridge` (``placement=``). It turns the
cartridge's target into a description (:meth:`Placement.resolve`) and starts instances of it
(:meth:`Placement.launch`). What a launch returns, an :class:`Instance`, is everything a
connection needs from a running cartridge and nothing more:

* a byte stream pair: :attr:`Instance.stdin` (a :class:`ByteSink`) and
  :meth:`Instance.read_blocks` (every block the cartridge writes, then ``b""`` at its end);
* a stderr source (:attr:`Instance.stderr`, or ``None`` when the instance has none);
* a way to stop it: closing ``stdin`` asks it to exit, :meth:`Instance.kill` ends it now,
  :meth:`Instance.wait` waits for its end, :meth:`Instance.aclose` frees what is left;
* who it is and how it ended: :attr:`Instance.placement_id`, :attr:`Instance.pid` (``None``
  when it is not a local process), :attr:`Instance.returncode`, :meth:`Instance.describe_exit`.

The engine's connections, routing and replicas only use this interface: they never ask which
placement they have. :class:`~._subprocess.Subprocess` (a local process, the default) and
:class:`~._inprocess.InProcess` (a runtime served in this process over memory streams) are
the two placements here; a placement on a cluster plugs in the same way
(:class:`cartridge_runtime.engine.ray.RayPlacement`).

A launch is bounded by ``EngineConfig.step_timeout``, or by the placement's own
``launch_timeout`` attribute (seconds) when it has one: reaching a cluster and finding a node
can take longer than starting a local process.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping
from typing import Protocol, runtime_checkable

import anyio.abc
import attrs

from ..._plumbing import ByteSink as PlumbingSink
from ..._report import AttributionClass, ErrorCode
from ...errors import EngineError

__all__ = (
    "ByteSink",
    "Instance",
    "LaunchError",
    "LaunchSpec",
    "Placement",
    "Target",
)


class LaunchError(EngineError):
    """A placement could not start an instance; the message says why (the engine reports it
    as a :class:`~cartridge_runtime.engine.SpawnFailed` at step ``spawn``)."""

    code = ErrorCode.SPAWN_FAILED
    attribution_class = AttributionClass.ENVIRONMENT


@attrs.frozen(kw_only=True)
class Target:
    """A cartridge target as a placement understood it.

    :ivar command: what runs, for status reports (the argv of a process).
    :ivar label: the default cartridge name.
    """

    command: tuple[str, ...]
    label: str


@attrs.frozen(kw_only=True)
class LaunchSpec:
    """One instance to start.

    :ivar name: the cartridge's name in the engine.
    :ivar replica: which replica of it (0, 1, ...).
    :ivar target: the resolved target.
    :ivar env: the process environment (``None``: inherit), for placements that have one.
    """

    name: str
    replica: int
    target: Target
    env: Mapping[str, str] | None = None


class ByteSink(PlumbingSink, Protocol):
    """The engine's writing end to an instance (a local pipe, or memory): what the outbox
    writes to, and the end of input."""

    def close(self) -> None:
        """End of input for the instance (it exits when it sees it)."""
        ...


class Instance(Protocol):
    """One running cartridge instance, as a connection drives it (see the module docstring)."""

    @property
    def placement_id(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdin(self) -> ByteSink: ...

    @property
    def stderr(self) -> AsyncIterable[bytes] | None: ...

    async def read_blocks(
        self,
        size: int,
        on_data: Callable[[bytes | memoryview], None],
        next_size: Callable[[], int],
        buffer: bytearray,
    ) -> None:
        """Call ``on_data`` with every block the instance writes, then with ``b""`` at its
        end, and return. A view passed to ``on_data`` is valid only until it returns.

        :raises Exception: whatever ``on_data`` raised (reading stops there).
        """
        ...

    def kill(self) -> None:
        """End the instance now (no-op once it ended)."""
        ...

    async def wait(self) -> None:
        """Wait until the instance ended."""
        ...

    def describe_exit(self) -> str:
        """How it ended (``exit status 3``, ``killed by signal 9 (SIGKILL)``...), or
        ``still running``."""
        ...

    async def aclose(self) -> None:
        """Free the instance's streams once it ended."""
        ...


@runtime_checkable
class Placement(Protocol):
    """Where instances of a cartridge run (see the module docstring)."""

    def resolve(self, target: object) -> Target:
        """Check a cartridge target and describe it.

        :raises CartridgeNotFound: the target does not exist.
        :raises TypeError: the placement cannot run this kind of target.
        """
        ...

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        """Start one instance; tasks it needs run in ``task_group`` (which lives as long as
        the connection to the instance).

        :raises LaunchError: it could not be started.
        """
        ...
