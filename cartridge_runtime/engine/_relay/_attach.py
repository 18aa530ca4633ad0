"""How hosts reach the engine's switch: the engine dials a host's socket (and dials again
when the link closes, re-attaching the host in place), or listens on a socket a host dials."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import anyio.abc

from ...protocol import ProtocolError
from ...relay import PROBE_TIMEOUT, HostAttachError, HostState
from .._supervision._lifecycle import HostLinkChanged, Subscription
from ._socket import HostSocketError, check_peer, secure_socket_path
from ._switch import HostSwitch

__all__ = ("REDIAL_EVERY", "dial_host", "host_name", "listen_for_host", "probe_ended")

log = logging.getLogger("cartridge_runtime.engine")

#: Seconds between attempts to reach a host whose link closed.
REDIAL_EVERY = 1.0


def host_name(path: str | os.PathLike[str], name: str | None) -> str:
    """A host's name: given, else its socket file's name without the extension."""
    return name or Path(path).stem


async def _open(path: Path) -> anyio.abc.SocketStream:
    try:
        stream = await anyio.connect_unix(path)
    except OSError as exc:
        raise HostSocketError(f"cannot reach the host at {path}: {exc.strerror or exc}") from None
    try:
        check_peer(stream)
    except HostSocketError:
        await stream.aclose()
        raise
    return stream


async def dial_host(switch: HostSwitch, path: str | os.PathLike[str], name: str) -> None:
    """Dial once and attach (errors raised); then, in the switch's task group, dial again
    each time the link closes, until the engine stops.

    :raises HostSocketError: the socket is unsafe or nobody listens on it.
    :raises HostAttachError: ``name`` is attached already.
    :raises RelayProtocolError: the host's first frame is not a readable RELAY_NOTIFY.
    """
    where = secure_socket_path(path, create=False)
    if not switch.core.accepts_attach(name):
        raise HostAttachError(f"host {name!r} is already attached: one link per id")
    await switch.attach(await _open(where), name)
    switch.spawn(_redial, switch, where, name)


async def probe_ended(switch: HostSwitch, events: Subscription, name: str) -> None:
    """Wait until host ``name``'s identity probe has ended (RLY-6): healthy, unhealthy or
    detached again. ``events`` is a subscription opened before the host was dialled, so no
    change is missed; the probe's own deadline bounds the wait, with a second's margin."""
    with anyio.move_on_after(PROBE_TIMEOUT + 1.0):
        while _state(switch, name) is HostState.PROBING:
            async for event in events:
                if isinstance(event, HostLinkChanged) and event.host == name:
                    break
    state = _state(switch, name)
    if state is not HostState.HEALTHY:
        (view,) = [v for v in switch.hosts() if v.id == name]
        log.warning("host %s is %s: %s", name, state.value, view.last_error or "no probe answer")


def _state(switch: HostSwitch, name: str) -> HostState:
    for view in switch.hosts():
        if view.id == name:
            return view.state
    return HostState.DETACHED


async def _redial(switch: HostSwitch, where: Path, name: str) -> None:
    while True:
        await anyio.sleep(REDIAL_EVERY)
        if switch.attached(name):
            continue
        try:
            await switch.attach(await _open(where), name)
            log.info("host %s re-attached", name)
        except (HostSocketError, ProtocolError) as exc:
            log.debug("host %s not back yet: %s", name, exc)


async def listen_for_host(
    switch: HostSwitch,
    path: str | os.PathLike[str],
    name: str,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on a new owner-only socket at ``path`` for host ``name`` (one link at a time;
    each new link re-attaches it in place), until the engine stops."""
    where = secure_socket_path(path, create=True)
    listener = await anyio.create_unix_listener(where, mode=0o600)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        try:
            check_peer(stream)
            await switch.attach(stream, name)
        except (HostSocketError, ProtocolError) as exc:
            log.warning("host %s refused: %s", name, exc)
            await stream.aclose()

    try:
        async with listener:
            task_status.started()
            await listener.serve(serve)
    finally:
        where.unlink(missing_ok=True)
