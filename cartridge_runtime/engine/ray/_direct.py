"""The direct stream of a Ray placement: the bytes of calls go over a socket, not through Ray.

Ray places the actor, supervises it and reports its failure; the frames of calls go over one
socket between the engine and the cartridge's process, as large-model servers on Ray carry
their tokens. The actor opens the socket (:class:`Listener`: a Unix socket on its host and a
TCP one on its node's address), the engine connects to the one it can reach (:func:`dial`: the
Unix socket when it is on the same host, else TCP) and presents a one-time token; the actor
accepts the connection that presents it (:meth:`Listener.accept`) and starts the cartridge with
that socket as its stdin and stdout. From then on the actor moves no bytes: the engine reads and
writes the socket with the same non-blocking fd plumbing as a local subprocess's pipes
(:class:`~cartridge_runtime._plumbing.FdReader`, :class:`SocketSink`), so a call over Ray runs
the ordinary frame path.

When no direct path exists (the engine cannot reach the node's address, as through Ray
Client), :func:`dial` returns ``None`` and the bytes go through Ray's calls and object store
instead (:mod:`._instance`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import selectors
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import anyio

from cartridge_runtime._plumbing import FdReader, FdSink

__all__ = (
    "ACCEPT_TIMEOUT",
    "CONNECT_TIMEOUT",
    "SOCKET_BUFFER",
    "TOKEN_BYTES",
    "TOKEN_WAIT",
    "Listener",
    "SocketSink",
    "dial",
    "socket_streams",
)

#: Seconds the engine tries to reach the actor's socket before it falls back to Ray's calls.
CONNECT_TIMEOUT = 5.0
#: Seconds the actor waits for the engine's connection and its token.
ACCEPT_TIMEOUT = 30.0
#: Bytes of the one-time token the engine presents on connecting.
TOKEN_BYTES = 32
#: Seconds one connection has to present the token (the engine sends it before it asks the
#: actor to start, so it is already there): a stranger that connects and stays silent holds
#: up the engine's connection behind it for this long at most.
TOKEN_WAIT = 2.0
#: Kernel buffer asked for each way (capped by the host's ``net.core.[rw]mem_max``): as the
#: enlarged pipes of a local subprocess, a 256 KiB CHUNK crosses without a ping-pong.
SOCKET_BUFFER = 4 << 20


def _tune(sock: socket.socket) -> None:
    """Large buffers, and no delay for small frames on TCP (best effort)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# --- the actor's side ---------------------------------------------------------------------


class Listener:
    """The sockets an actor opens for the engine: a Unix socket in a private folder of this
    host, and a TCP socket on the node's address (``host``; none when it is ``None``).

    :meth:`addresses` says where they are; :meth:`accept` takes the engine's connection;
    :meth:`close` closes both and removes the folder.
    """

    def __init__(self, host: str | None) -> None:
        self._sockets: list[socket.socket] = []
        self._folder = tempfile.mkdtemp(prefix="cartridge-ray-")
        self._path = os.path.join(self._folder, "s")
        try:
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sockets.append(unix)
            _tune(unix)
            unix.bind(self._path)
            unix.listen(4)
            self._tcp: tuple[str, int] | None = None
            if host:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                tcp = socket.socket(family, socket.SOCK_STREAM)
                self._sockets.append(tcp)
                _tune(tcp)
                tcp.bind((host, 0))
                tcp.listen(4)
                self._tcp = (host, int(tcp.getsockname()[1]))
        except BaseException:
            self.close()
            raise

    def addresses(self) -> dict[str, Any]:
        """Where the engine may connect: ``unix`` (a path on this host, with ``host`` this
        host's name) and ``tcp`` (``[address, port]``, when there is one)."""
        found: dict[str, Any] = {"unix": self._path, "host": os.uname().nodename}
        if self._tcp is not None:
            found["tcp"] = list(self._tcp)
        return found

    def accept(self, token: bytes, timeout: float = ACCEPT_TIMEOUT) -> socket.socket:
        """The first connection that presents ``token``, in blocking mode (others are closed).

        :raises TimeoutError: none did within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for sock in self._sockets:
                selector.register(sock, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    listening = key.fileobj
                    assert isinstance(listening, socket.socket)
                    with contextlib.suppress(BlockingIOError):
                        conn, _ = listening.accept()
                        within = min(deadline, time.monotonic() + TOKEN_WAIT)
                        if _presents(conn, token, within):
                            conn.setblocking(True)
                            _tune(conn)
                            return conn
                        conn.close()
        raise TimeoutError(f"the engine did not connect within {timeout:g} s")

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        shutil.rmtree(self._folder, ignore_errors=True)


def _presents(conn: socket.socket, token: bytes, deadline: float) -> bool:
    """Whether ``conn`` sends ``token`` first, before ``deadline``."""
    got = b""
    try:
        while len(got) < len(token):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            conn.settimeout(left)
            part = conn.recv(len(token) - len(got))
            if not part:
                return False
            got += part
    except OSError:
        return False
    return hmac.compare_digest(got, token)


# --- the engine's side --------------------------------------------------------------------


async def dial(
    addresses: Mapping[str, Any], token: bytes, within: float = CONNECT_TIMEOUT
) -> socket.socket | None:
    """Connect to the actor's socket and present ``token``: the Unix socket when its path is
    on this host, else TCP. ``None`` when neither answers within ``within`` seconds (no
    direct path: the bytes then go through Ray)."""
    candidates: list[tuple[socket.AddressFamily, Any]] = []
    path = addresses.get("unix")
    if isinstance(path, str) and addresses.get("host") == os.uname().nodename:
        candidates.append((socket.AF_UNIX, path))
    tcp = addresses.get("tcp")
    if isinstance(tcp, list | tuple) and len(tcp) == 2:
        host, port = str(tcp[0]), int(tcp[1])
        candidates.append((socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port)))
    loop = asyncio.get_running_loop()
    for family, address in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            _tune(sock)
            sock.setblocking(False)
            with anyio.fail_after(within):
                await loop.sock_connect(sock, address)
                await loop.sock_sendall(sock, token)
        except (OSError, TimeoutError):
            sock.close()
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    return None


class SocketSink(FdSink):
    """The engine's writing end of the direct stream: an :class:`FdSink` whose :meth:`close`
    also ends the cartridge's input (a write shutdown, which it reads as EOF, while the
    reading end stays open)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock.detach())

    def close(self) -> None:
        if not self.closed:
            _shutdown(self.fd, socket.SHUT_WR)
        super().close()

    def abort(self) -> None:
        """Shut the socket down both ways: the engine's reader sees its end at once (no fd
        is closed under a reader still watching it) and the cartridge reads EOF."""
        if not self.closed:
            _shutdown(self.fd, socket.SHUT_RDWR)


def _shutdown(fd: int, how: int) -> None:
    """``shutdown(fd, how)`` on a raw fd, through a socket object that does not own it; a
    socket already shut down or reset is left as it is."""
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(how)
    except OSError:
        pass
    finally:
        sock.detach()


def socket_streams(sock: socket.socket) -> tuple[SocketSink, FdReader]:
    """The connected socket as the instance's stdin (a :class:`SocketSink`) and stdout (an
    :class:`FdReader` over its own copy of the fd); each closes its own fd."""
    reader = FdReader(os.dup(sock.fileno()))
    return SocketSink(sock), reader
