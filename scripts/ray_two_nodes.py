#!/usr/bin/env python3
"""Two Ray nodes on this host, one of them lost: the engine moves the replica to the other.

The walk-through of README "Scaling out" on loopback only, timed step by step:

1. ``ray start --head`` on 127.0.0.1 with a custom resource ``{"pool": 1}``, then a second
   node (``ray start --address=127.0.0.1:PORT``) with ``{"pool": 1}`` too;
2. an engine with ``RayPlacement(address="127.0.0.1:PORT", resources={"pool": 1})``: while a
   holder actor keeps the head's ``pool``, the cartridge's actor can only go to the second
   node; one call is answered there, then the holder lets go;
3. every process of the second node is killed, the cartridge's included (as a lost machine:
   ``SIGKILL``, no goodbye);
4. the next calls are answered: the first may fail with ``CARTRIDGE_DIED`` ("its Ray actor was
   lost") if it was sent before Ray declared the node dead; the engine starts a new actor,
   which only the head can take.

It prints what happened and exits 0 when the replica moved, 1 when it did not, 2 on a bad
argument or when the cluster could not be started. Every process it started (both nodes, the
actors, the cartridges: all carry a marker in their environment) is killed at the end, on
failure and on Ctrl-C too. The head's health checks are shortened (0.5 s, 3 misses) so that a
lost node is noticed in about 2 s (``--health-ms 0`` keeps Ray's defaults). Ray announces
each node at the host's own address even when told 127.0.0.1 (it refuses loopback for a
cluster of several nodes); either way nothing leaves this host.

Usage::

    .venv/bin/python scripts/ray_two_nodes.py [--port PORT] [--timeout 120] [--health-ms 500]
        [--ray PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CARTRIDGE = ROOT / "cartridges" / "text.py"
METADATA = 'cap:in="media:ext=txt;plain-text";op=metadata;out="media:fmt=json;record;text-metadata"'
TEXT = "media:ext=txt;plain-text"
PR_SET_CHILD_SUBREAPER = 36
#: Set in the environment of every process started here, so that cleanup finds them all (Ray
#: renames its workers, and a lost node's workers outlive their parent for a moment).
MARKER = "CARTRIDGE_RAY_TWO_NODES"
#: Missed health checks after which the head declares a node dead (with ``--health-ms``).
HEALTH_MISSES = 3


class Failed(Exception):
    """The walk-through could not run (exit status 2) or the replica did not move (1)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now (each Ray process needs its own)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def _marked(value: str) -> Iterator[int]:
    """The processes whose environment has ``MARKER=value``."""
    needle = f"{MARKER}={value}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                yield int(entry.name)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class Nodes:
    """The Ray nodes this script starts, each a ``ray start --block`` in a session of its own
    (its processes share its process group) with a marker of its own in their environment."""

    def __init__(self, ray: str, temp: Path, ports: list[int], health_ms: int) -> None:
        self.ray = ray
        self.health_ms = health_ms
        self.temp = temp
        self.port = ports[0]
        self._ports = ports[1:]
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}

    def _env(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        if self.health_ms:
            ms = str(self.health_ms)
            env["RAY_health_check_period_ms"] = env["RAY_health_check_timeout_ms"] = ms
            env["RAY_health_check_initial_delay_ms"] = ms
            env["RAY_health_check_failure_threshold"] = str(HEALTH_MISSES)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        env[MARKER] = f"{self.temp}:{name}"
        return env

    def start(self, name: str, resources: dict[str, float], head: bool) -> None:
        args = [self.ray, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1"]
        args.append(f"--resources={json.dumps(resources)}")
        if head:
            dashboard, agent, grpc, metrics, env_agent = self._ports[:5]
            args += [
                "--head",
                f"--port={self.port}",
                f"--temp-dir={self.temp}",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--dashboard-port={dashboard}",
                f"--dashboard-agent-listen-port={agent}",
                f"--dashboard-agent-grpc-port={grpc}",
                f"--metrics-export-port={metrics}",
                f"--runtime-env-agent-port={env_agent}",
            ]
        else:
            agent, grpc, metrics, env_agent = self._ports[5:9]
            args += [
                f"--address=127.0.0.1:{self.port}",
                f"--dashboard-agent-listen-port={agent}",
                f"--dashboard-agent-grpc-port={grpc}",
                f"--metrics-export-port={metrics}",
                f"--runtime-env-agent-port={env_agent}",
            ]
        log = (self.temp / f"{name}.log").open("wb")
        try:
            self.nodes[name] = subprocess.Popen(
                args,
                env=self._env(name),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise Failed(f"cannot run {self.ray}: {exc}", 2) from exc
        finally:
            log.close()

    def check(self, name: str) -> None:
        """:raises Failed: the node's ``ray start`` ended (its log's tail says why)."""
        proc = self.nodes[name]
        if proc.poll() is not None:
            tail = (self.temp / f"{name}.log").read_text(errors="replace").strip()[-600:]
            raise Failed(f"ray start ({name}) ended with status {proc.returncode}:\n{tail}", 2)

    def kill(self, name: str) -> int:
        """SIGKILL every process of a node at once; how many there were."""
        proc = self.nodes[name]
        pids = set(_marked(f"{self.temp}:{name}"))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _kill(pids)
        proc.wait()
        return len(pids)

    def stop(self) -> None:
        """Kill every process started here, whatever state the walk-through stopped in."""
        for name, proc in self.nodes.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _kill(set(_marked(f"{self.temp}:{name}")))
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # the orphans of killed nodes (see _reap_orphans)


class Clock:
    """Seconds since the start, and what is left of ``--timeout``."""

    def __init__(self, timeout: float) -> None:
        self.start = time.monotonic()
        self.timeout = timeout

    def left(self) -> float:
        return self.timeout - (time.monotonic() - self.start)

    def say(self, text: str) -> None:
        print(f"{time.monotonic() - self.start:7.2f} s  {text}", flush=True)


def _wait(what: str, predicate: Any, nodes: Nodes, clock: Clock) -> None:
    """Poll ``predicate`` until it holds, a node's ``ray start`` ends, or time runs out."""
    while not predicate():
        for name in nodes.nodes:
            nodes.check(name)
        if clock.left() <= 0:
            raise Failed(f"{what}: not within --timeout {clock.timeout:g} s", 2)
        time.sleep(0.1)


async def walk(nodes: Nodes, clock: Clock) -> str:
    """Steps 2 to 4 (both nodes started); the line that says where the replica went."""
    import anyio
    import ray

    from cartridge_runtime.engine import CallError, Engine
    from cartridge_runtime.engine.ray import RayPlacement

    placement = RayPlacement(
        address=f"127.0.0.1:{nodes.port}", num_cpus=0, resources={"pool": 1}, placement_timeout=30
    )
    await placement._connect()
    _wait("the second node's start", lambda: len(_alive(ray)) >= 2, nodes, clock)
    clock.say(
        "driver connected; nodes: "
        + ", ".join(f"{n['NodeID'][:8]} at {n['NodeManagerAddress']}" for n in _alive(ray))
    )

    @ray.remote(num_cpus=0, resources={"pool": 1})
    class Holder:
        def node(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

    holder = Holder.remote()  # type: ignore[attr-defined]
    head = await holder.node.remote()
    clock.say(f"a holder keeps the pool of node {head[:8]} (the head)")
    env = dict(os.environ)
    env[MARKER] = f"{nodes.temp}:cartridge"
    async with Engine() as engine:
        name = engine.add_cartridge(CARTRIDGE, placement=placement, env=env)
        await engine.call(METADATA, [(TEXT, "one line\n")])
        first = _instance(engine, name)
        clock.say(f"call 1 answered by {first.placement_id}")
        if first.node_id == head:
            raise Failed("the first instance went to the head despite the holder")
        ray.kill(holder)
        # A lost machine loses its cartridge too (its marker is its own, not the node's: the
        # engine gives it its environment); the bytes of calls reach it over a socket that no
        # Ray process holds, so it is killed here as the node's other processes are.
        count = nodes.kill("second")
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(first.remote_pid, signal.SIGKILL)
            count += 1
        lost = time.monotonic()
        clock.say(f"second node killed ({count} processes, SIGKILL); the holder let go")
        for attempt in (2, 3):
            try:
                with anyio.fail_after(max(clock.left(), 0.1)):
                    await engine.call(METADATA, [(TEXT, "one line\n")])
            except CallError as exc:
                clock.say(f"call {attempt}: {exc.code}: {exc.message.splitlines()[0][:160]}")
                continue
            clock.say(f"call {attempt} answered by {_instance(engine, name).placement_id}")
            break
        took = time.monotonic() - lost
        second = _instance(engine, name)
        (status,) = engine.status()
        clock.say(f"engine: {status.starts} starts, replica {status.replicas[0].state}")
    if second is first or second.node_id != head:
        raise Failed(f"the replica did not move to the head (it is {second.placement_id})")
    return (
        f"OK: the replica moved from node {first.node_id[:8]} to the head "
        f"{head[:8]}, answering {took:.1f} s after the node was lost"
    )


def _reap_orphans() -> None:
    """Become the parent of the processes orphaned here (Linux's child subreaper), so that a
    killed node's processes are reaped by :meth:`Nodes.stop` instead of lingering as zombies
    under an init that does not reap."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


async def _bounded(nodes: Nodes, clock: Clock) -> str:
    """:func:`walk` within what is left of ``--timeout`` (:raises TimeoutError: past it)."""
    import anyio

    with anyio.fail_after(max(clock.left(), 0.1)):
        return await walk(nodes, clock)


def _alive(ray: Any) -> list[dict[str, Any]]:
    return [node for node in ray.nodes() if node["Alive"]]


def _instance(engine: Any, name: str) -> Any:
    """The replica's running instance (a ``RayInstance``)."""
    conn = engine._slots[name].replicas[0].conn
    assert conn is not None and conn.process is not None
    return conn.process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the head's port (0: a free one)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for it all")
    parser.add_argument(
        "--health-ms",
        type=int,
        default=500,
        help=f"the head's health check period; a node is lost after {HEALTH_MISSES} misses "
        "(0: Ray's defaults)",
    )
    parser.add_argument(
        "--ray", default=str(Path(sys.executable).with_name("ray")), help="the ray command"
    )
    args = parser.parse_args(argv)
    if args.port != 0 and not 1024 <= args.port <= 65535:
        parser.error(f"--port must be 0 (a free one) or 1024 to 65535, not {args.port}")
    if args.health_ms < 0:
        parser.error(f"--health-ms must be 0 (Ray's defaults) or more, not {args.health_ms}")
    if not 0 < args.timeout < float("inf"):
        parser.error(f"--timeout must be a number of seconds above 0, not {args.timeout:g}")
    if shutil.which(args.ray) is None:
        print(f"FAILED: no ray command at {args.ray} (pip install 'cartridge-runtime[ray]')")
        return 2
    _reap_orphans()
    # A token of its own for this cluster (nodes and driver), whatever ~/.ray/auth_token
    # holds: Ray turns token auth on once that file exists, and other clusters on this host
    # may write it.
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    clock = Clock(args.timeout)
    temp = Path(tempfile.mkdtemp(prefix="ray2n-", dir="/tmp"))  # short: Ray's socket paths
    ports = free_ports(10)
    if args.port:
        ports[0] = args.port
    nodes = Nodes(args.ray, temp, ports, args.health_ms)
    clock.say(f"temp dir {temp}; every process started here has {MARKER}={temp}:NAME")
    try:
        nodes.start("head", {"pool": 1}, head=True)
        _wait("the head's start", (temp / "ray_current_cluster").exists, nodes, clock)
        clock.say(f"head up on 127.0.0.1:{nodes.port} (resources pool=1)")
        nodes.start("second", {"pool": 1}, head=False)
        import anyio

        print(anyio.run(_bounded, nodes, clock), flush=True)
        return 0
    except Failed as exc:
        print(f"FAILED: {exc}", flush=True)
        return exc.status
    except TimeoutError:
        print(f"FAILED: not done within --timeout {args.timeout:g} s", flush=True)
        return 1
    finally:
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        nodes.stop()
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
