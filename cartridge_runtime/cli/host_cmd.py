"""``cartridge host --listen PATH | --connect PATH [TARGET... | --from-dir DIR]``: a cartridge
host behind one Unix socket.

The cartridges given (or installed under ``--from-dir``) run in this process's engine; a relay
switch (this package's :meth:`~cartridge_runtime.engine.Engine.add_host`, or capdag's
``RelaySwitch``) routes calls to them over the socket. ``--listen`` creates the socket
(owner-only, in a folder only its owner may enter) and serves one switch at a time;
``--connect`` dials a switch that listens, and dials again when the link closes. Memory
limits, idle stops and activity timeouts are the engine's (``--memory-limit``,
``--idle-timeout``, ``--activity-timeout``). Runs until SIGTERM, SIGINT or SIGHUP, then stops
the way a service manager expects: no new link, its cartridges shut down with their grace
period, the socket it created removed. Exit status: 0 after such a stop, 2 a usage error or a
socket that is not safe to use.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from ..engine import Engine, EngineError, HostSocketError, secure_socket_path
from ..host import connect, listen
from ._app import app

__all__ = ("host_command",)

_USAGE = 2


async def _serve(
    listen_at: Path | None,
    connect_to: Path | None,
    targets: list[Path],
    from_dir: Path | None,
    engine: Engine,
) -> None:
    failure: HostSocketError | EngineError | None = None
    async with engine, anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        try:
            await _host(listen_at, connect_to, targets, from_dir, engine)
        except (HostSocketError, EngineError) as exc:
            failure = exc  # raised bare below, not inside the task group's ExceptionGroup
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` at the first SIGTERM, SIGINT or SIGHUP: the serving ends, the
    engine closes its cartridges and the listening socket is removed on the way out."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            print(f"cartridge host: stopping on {name}", file=sys.stderr, flush=True)
            scope.cancel()
            return


async def _host(
    listen_at: Path | None,
    connect_to: Path | None,
    targets: list[Path],
    from_dir: Path | None,
    engine: Engine,
) -> None:
    if from_dir is not None:
        await engine.discover(from_dir)
    for target in targets:
        name = engine.add_cartridge(str(target))
        await engine.start(name)
    if listen_at is not None:
        print(f"cartridge host: listening on {listen_at}", file=sys.stderr, flush=True)
        await listen(engine, listen_at)
    else:
        assert connect_to is not None
        print(f"cartridge host: serving the switch at {connect_to}", file=sys.stderr)
        await connect(engine, connect_to)


@app.command("host")
def host_command(
    targets: Annotated[
        list[Path] | None, typer.Argument(help="Cartridges to host (entry files or folders).")
    ] = None,
    listen_at: Annotated[
        Path | None, typer.Option("--listen", help="Create this Unix socket and serve on it.")
    ] = None,
    connect_to: Annotated[
        Path | None, typer.Option("--connect", help="Dial the switch listening on this socket.")
    ] = None,
    from_dir: Annotated[
        Path | None, typer.Option("--from-dir", help="Host every cartridge installed here.")
    ] = None,
    memory_limit: Annotated[
        int | None, typer.Option("--memory-limit", help="Bytes of resident memory per instance.")
    ] = None,
    idle_timeout: Annotated[
        float | None, typer.Option("--idle-timeout", help="Seconds idle before an instance stops.")
    ] = None,
    activity_timeout: Annotated[
        float | None, typer.Option("--activity-timeout", help="Seconds a call may stay silent.")
    ] = None,
) -> None:
    """Host cartridges behind one Unix socket for a relay switch."""
    if (listen_at is None) == (connect_to is None):
        print("error: give exactly one of --listen PATH and --connect PATH", file=sys.stderr)
        raise typer.Exit(_USAGE)
    if not targets and from_dir is None:
        print("error: give the cartridges to host: TARGET... or --from-dir DIR", file=sys.stderr)
        raise typer.Exit(_USAGE)
    if from_dir is not None and not from_dir.is_dir():
        print(f"error: --from-dir {from_dir}: not a folder", file=sys.stderr)
        raise typer.Exit(_USAGE)
    try:
        secure_socket_path(listen_at or connect_to or Path(), create=False)
    except HostSocketError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    try:
        given: dict[str, Any] = {
            "memory_limit": memory_limit,
            "idle_timeout": idle_timeout,
            "activity_timeout": activity_timeout,
        }
        engine = Engine(None, **{k: v for k, v in given.items() if v is not None})
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    try:
        anyio.run(_serve, listen_at, connect_to, list(targets or ()), from_dir, engine)
    except KeyboardInterrupt:
        return
    except (HostSocketError, EngineError) as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
