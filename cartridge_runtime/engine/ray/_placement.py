"""A placement on a Ray cluster: each instance is a Ray actor owning the cartridge's process.

:class:`RayPlacement` resolves targets as :class:`~cartridge_runtime.engine.Subprocess` does
(a ``.py`` script runs with this interpreter's path, which a Ray cluster built from one image
has on every node), connects to Ray once per process (``ray.init``; with no address it starts
or joins a local instance), and launches each instance as a :class:`~._host.CartridgeHost`
actor with the resources asked for. An actor no node can take within ``placement_timeout`` is
a launch failure naming the resources the cluster lacks. Ray's awaitables are asyncio
futures: on another anyio backend a launch is refused with that reason.

Ray places and supervises the actor; the bytes of calls go over a direct stream between the
engine and the cartridge's process (:mod:`._direct`), through Ray's calls only where the
engine cannot reach the node.

A dead actor is not restarted by Ray: the connection sees its death like a cartridge's, and
the engine starts a new instance (a new actor) for the calls after it, as for any placement.

Each instance reserves **a quarter of a CPU** by default (``num_cpus=0.25``): replicas and
other cartridges share a small node, as local processes would. Ask for whole CPUs when a
cartridge computes hard. When no node can take an instance, the error names what the cluster
lacks and which instances of this process hold the resources.

The engine's memory guard, idle stop and drain work on Ray instances too: the actor reads its
cartridge's memory on its node (:meth:`~._instance.RayInstance.resident_memory`) and sets its
``RLIMIT_AS`` there.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

import anyio
import anyio.abc
import attrs
import sniffio

from .._placements._seam import Instance, LaunchError, LaunchSpec, Target
from .._placements._subprocess import Subprocess

__all__ = ("DEFAULT_CPUS", "INIT_TIMEOUT", "RayPlacement")

#: Seconds allowed for connecting to Ray (or starting a local instance: about 6 s here).
INIT_TIMEOUT = 120.0

#: CPUs an instance reserves unless told otherwise: a share, so that several fit on one CPU.
DEFAULT_CPUS = 0.25

#: What the live instances launched by this process hold: label -> resources, by actor.
_holders: dict[int, tuple[str, dict[str, float]]] = {}

_init_lock = threading.Lock()
_init_future: concurrent.futures.Future[None] | None = None
_actor_class: Any = None


def _check_number(name: str, value: float | None, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"RayPlacement {name} must be a number of at least 0, not {value!r}")


@attrs.frozen(kw_only=True)
class RayPlacement:
    """Run each instance in a Ray actor on some node of a cluster.

    :param address: the cluster: ``None`` starts (or joins) a local Ray instance, ``"auto"``
        joins the one running on this host, ``"ray://host:10001"`` a remote one through Ray
        Client. Ignored when Ray is already initialised in this process.
    :param num_cpus: CPUs each instance reserves on its node (default a quarter,
        :data:`DEFAULT_CPUS`, so replicas and other cartridges share a small node).
    :param num_gpus: GPUs each instance reserves (the cartridge sees them in
        ``CUDA_VISIBLE_DEVICES``).
    :param resources: custom resources each instance reserves (``{"big-memory": 1}``).
    :param placement_timeout: seconds to wait for a node that can take the instance; then the
        start-up fails with ``SPAWN_FAILED`` naming the resources the cluster lacks.
    :param direct: carry the bytes of calls over a socket between the engine and the
        cartridge's process (a Unix socket on the same host, else TCP to the node's address),
        falling back to Ray's calls when it cannot be reached; ``False``: always through Ray.
    :raises ImportError: Ray is not installed (``pip install 'cartridge-runtime[ray]'``).
    :raises ValueError: a negative or non-finite number, a bad address or resource.
    """

    address: str | None = None
    num_cpus: float = DEFAULT_CPUS
    num_gpus: float = 0
    resources: Mapping[str, float] = attrs.field(factory=dict, converter=dict)
    placement_timeout: float = 60.0
    direct: bool = True

    def __attrs_post_init__(self) -> None:
        if importlib.util.find_spec("ray") is None:
            raise ImportError(
                "RayPlacement needs Ray: pip install 'cartridge-runtime[ray]'", name="ray"
            )
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise ValueError(
                f"RayPlacement address must be None, 'auto' or 'ray://...', not {self.address!r}"
            )
        _check_number("num_cpus", self.num_cpus, allow_none=False)
        _check_number("num_gpus", self.num_gpus, allow_none=False)
        _check_number("placement_timeout", self.placement_timeout, allow_none=False)
        for key, amount in self.resources.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"RayPlacement resource names are strings, not {key!r}")
            _check_number(f"resource {key!r}", amount, allow_none=False)

    @property
    def launch_timeout(self) -> float:
        """The bound on one :meth:`launch` (connecting, placing, spawning), which the engine
        uses instead of its ``step_timeout``."""
        return INIT_TIMEOUT + self.placement_timeout

    def request(self) -> dict[str, float]:
        """The resources one instance reserves, by Ray's names."""
        wanted: dict[str, float] = {"CPU": self.num_cpus, "GPU": self.num_gpus}
        wanted.update(self.resources)
        return {k: v for k, v in wanted.items() if v}

    def resolve(self, target: object) -> Target:
        """:raises CartridgeNotFound: the script or program does not exist here.
        :raises TypeError: the target is not a path or a command list."""
        resolved = Subprocess().resolve(target)
        return Target(command=resolved.command, label=resolved.label)

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        """:raises LaunchError: not on asyncio, Ray cannot be reached, no node can take the
        instance within ``placement_timeout``, or the program cannot be started there."""
        backend = sniffio.current_async_library()
        if backend != "asyncio":
            raise LaunchError(
                f"RayPlacement needs the asyncio backend (Ray's awaitables are asyncio "
                f"futures); this engine runs on {backend}"
            )
        import ray
        from ray.exceptions import RayError

        from ._host import THREADS
        from ._instance import RayInstance, ray_reason, start_actor

        await self._connect()
        actor = (
            _host_class()
            .options(
                num_cpus=self.num_cpus,
                num_gpus=self.num_gpus,
                resources=dict(self.resources),
                max_restarts=0,
                max_concurrency=THREADS,
            )
            .remote()
        )
        try:
            with anyio.fail_after(self.placement_timeout):
                where, streams = await start_actor(
                    actor, list(spec.target.command), spec.env, direct=self.direct
                )
        except TimeoutError:
            ray.kill(actor, no_restart=True)
            # Untyped in Ray: the cluster's total resources by name.
            totals = cast(Callable[[], Mapping[str, float]], ray.cluster_resources)()
            raise LaunchError(self._unplaced(totals, _holding())) from None
        except RayError as exc:
            ray.kill(actor, no_restart=True)
            raise LaunchError(
                f"the cartridge's actor could not start it: {ray_reason(exc)}"
            ) from exc
        except BaseException:
            ray.kill(actor, no_restart=True)
            raise
        key = id(actor)
        _holders[key] = (f"{spec.name}/{spec.replica}", self.request())

        def released() -> None:
            _holders.pop(key, None)

        instance = RayInstance(actor, where, on_end=released, direct=streams)
        if streams is not None:
            task_group.start_soon(instance.watch)
        return instance

    def _unplaced(self, cluster: Mapping[str, float], holders: str = "") -> str:
        """Why no node took the actor: the resources the cluster lacks, if any, and who of
        this process holds them (``holders``)."""
        wanted = self.request()
        missing = [
            f"{name}={amount:g} (the cluster has {cluster.get(name, 0):g})"
            for name, amount in wanted.items()
            if cluster.get(name, 0) < amount
        ]
        within = f"within placement_timeout={self.placement_timeout:g}s"
        held = f"; held by this engine: {holders}" if holders else ""
        if missing:
            return f"no Ray node can take the instance {within}: missing {', '.join(missing)}{held}"
        asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items()) or "nothing"
        return f"no Ray node had {asked} free {within} (all taken by other work{held})"

    async def _connect(self) -> None:
        """Initialise Ray in this process once (in a thread of its own: it blocks for seconds).

        :raises LaunchError: Ray cannot be reached or started within :data:`INIT_TIMEOUT`.
        """
        import asyncio

        import ray

        if ray.is_initialized():
            return
        try:
            with anyio.fail_after(INIT_TIMEOUT):
                await asyncio.wrap_future(_start_init(self.address))
        except TimeoutError:
            where = self.address or "a local instance"
            raise LaunchError(f"Ray at {where} did not answer") from None
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise LaunchError(f"cannot connect to Ray at {self.address!r}: {exc}") from exc


def _holding() -> str:
    """The instances this process launched and what each holds, for a placement error."""
    return ", ".join(
        f"{label} ({', '.join(f'{k}={v:g}' for k, v in held.items())})"
        for label, held in _holders.values()
    )


def _start_init(address: str | None) -> concurrent.futures.Future[None]:
    """``ray.init`` in a thread that then lives as long as the process, or the start-up under
    way: a local Ray's processes are bound to the thread that started them (they die with it,
    ``PR_SET_PDEATHSIG``), so a pooled worker thread would take the cluster with it."""
    global _init_future
    import ray

    with _init_lock:
        future = _init_future
        if future is not None and (not future.done() or ray.is_initialized()):
            return future
        future = _init_future = concurrent.futures.Future()

    def body() -> None:
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        except BaseException as exc:
            future.set_exception(exc)
            return
        future.set_result(None)
        threading.Event().wait()  # never set: the thread stays while the process lives

    threading.Thread(target=body, name="cartridge-ray-init", daemon=True).start()
    return future


def _host_class() -> Any:
    """The actor class of :class:`~._host.CartridgeHost` (made once)."""
    global _actor_class
    if _actor_class is None:
        import ray

        from ._host import CartridgeHost

        _actor_class = ray.remote(CartridgeHost)
    return _actor_class
