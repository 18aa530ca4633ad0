"""The relay socket: a Unix stream socket only its owner can reach, never a network address.

Rules (RLY-14): the socket's folder exists, belongs to this user and nobody else may enter
it (no group or other permission bits); the socket itself is created owner-only (0600); on
Linux every peer's credentials (``SO_PEERCRED``) are read and a peer running as another user
is refused before any frame. A remote host is reached by forwarding a Unix socket over SSH
(``docs/relay.md``), never by opening a port.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import sys
from pathlib import Path

import anyio.abc

from ...protocol import AttributionClass
from .._errors import EngineError

__all__ = ("HostSocketError", "check_peer", "peer_uid", "secure_socket_path", "tune_link")


class HostSocketError(EngineError):
    """The relay socket cannot be used safely or at all: a folder others can enter, a path
    that is not a socket, a peer running as another user (class ``environment``)."""

    attribution_class = AttributionClass.ENVIRONMENT


def secure_socket_path(path: str | os.PathLike[str], *, create: bool) -> Path:
    """Check where the socket lives (and, with ``create``, make its folder owner-only when
    missing and remove a stale socket file left by a host that died).

    :raises HostSocketError: the folder belongs to someone else or others may enter it, or
        the path exists and is not a socket.
    """
    where = Path(path).absolute()
    folder = where.parent
    if create and not folder.exists():
        folder.mkdir(mode=0o700, parents=True)
    try:
        info = folder.stat()
    except OSError as exc:
        raise HostSocketError(f"relay socket folder {folder}: {exc.strerror}") from None
    if info.st_uid != os.getuid():
        raise HostSocketError(f"relay socket folder {folder} belongs to another user")
    if info.st_mode & 0o077:
        raise HostSocketError(
            f"relay socket folder {folder} may be entered by others "
            f"(mode {stat.S_IMODE(info.st_mode):o}); make it owner-only: chmod 700 {folder}"
        )
    if create and where.exists():
        if not stat.S_ISSOCK(where.lstat().st_mode):
            raise HostSocketError(f"{where} exists and is not a socket")
        where.unlink()
    return where


def peer_uid(stream: anyio.abc.SocketStream) -> int | None:
    """The user id of the process at the other end (Linux ``SO_PEERCRED``; ``None`` where
    the system does not tell)."""
    raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    if not sys.platform.startswith("linux"):
        return None
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


#: Socket buffer size asked for each relay link: a 256 KiB chunk frame goes in one write and
#: one wake-up, as it does on a cartridge's grown pipe.
LINK_BUFFER = 4 << 20


def tune_link(stream: anyio.abc.SocketStream) -> None:
    """Ask the system for large send and receive buffers on a relay link (best effort)."""
    raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with contextlib.suppress(OSError):
            raw.setsockopt(socket.SOL_SOCKET, option, LINK_BUFFER)


def check_peer(stream: anyio.abc.SocketStream, *, own_uid: int | None = None) -> None:
    """Refuse a peer that runs as another user than ``own_uid`` (default: this process's).

    :raises HostSocketError: it does.
    """
    tune_link(stream)
    uid = peer_uid(stream)
    mine = os.getuid() if own_uid is None else own_uid
    if uid is not None and uid != mine:
        raise HostSocketError(f"refused a relay peer running as another user (uid {uid})")
