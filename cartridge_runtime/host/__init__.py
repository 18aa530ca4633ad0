"""A cartridge host: an engine's cartridges behind one Unix socket, for a relay switch.

Example::

    async with Engine() as engine:
        engine.add_cartridge("cartridges/interop.py")
        await listen(engine, "/run/user/1000/cartridges/host.sock")  # until cancelled

:func:`listen` serves one switch at a time on a socket it creates (a second connection while
one is served is closed at once); :func:`connect` dials a switch that listens and dials
again when the link closes. Both check the socket's folder and the peer's user first
(:func:`~cartridge_runtime.engine.secure_socket_path`). ``cartridge host`` is the command for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import anyio
import anyio.abc

from ..engine import Engine, HostSocketError, check_peer, secure_socket_path

__all__ = ("connect", "listen")

log = logging.getLogger("cartridge_runtime.host")

#: Seconds between attempts to reach a switch that is not there (or went away).
REDIAL_EVERY = 1.0


async def listen(
    engine: Engine,
    path: str | os.PathLike[str],
    *,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve switches on a new owner-only socket at ``path``, one at a time, until cancelled.

    :raises HostSocketError: the socket's folder is not owner-only
        (:func:`~cartridge_runtime.engine.secure_socket_path`).
    """
    where = secure_socket_path(path, create=True)
    listener = await anyio.create_unix_listener(where, mode=0o600)
    busy = False

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal busy
        try:
            check_peer(stream)
        except HostSocketError as exc:
            log.warning("%s", exc)
            await stream.aclose()
            return
        if busy:
            log.warning("a second switch connected while one is served: closed")
            await stream.aclose()
            return
        busy = True
        try:
            await engine.serve_switch(stream)
        finally:
            busy = False

    try:
        async with listener:
            if on_ready is not None:
                on_ready()
            await listener.serve(serve)
    finally:
        where.unlink(missing_ok=True)


async def connect(engine: Engine, path: str | os.PathLike[str], *, once: bool = False) -> None:
    """Dial the switch listening at ``path`` and serve it; dial again when the link closes
    (``once``: return instead), until cancelled.

    :raises HostSocketError: the socket's folder is not owner-only, or its listener runs as
        another user.
    """
    where = secure_socket_path(path, create=False)
    while True:
        try:
            stream = await anyio.connect_unix(where)
        except OSError as exc:
            if once:
                raise HostSocketError(f"cannot reach the switch at {where}: {exc}") from None
            await anyio.sleep(REDIAL_EVERY)
            continue
        try:
            check_peer(stream)
        except HostSocketError:
            await stream.aclose()
            raise
        await engine.serve_switch(stream)
        if once:
            return
        await anyio.sleep(REDIAL_EVERY)
