"""The relay socket: owner-only folder and socket, peers of another user refused, and the
``cartridge host`` command's usage errors (one line, exit 2)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import (
    Engine,
    HostSocketError,
    check_peer,
    peer_uid,
    secure_socket_path,
)
from cartridge_runtime.host import connect, listen


def test_a_folder_others_may_enter_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    with pytest.raises(HostSocketError, match="may be entered by others"):
        secure_socket_path(folder / "h.sock", create=True)


def test_a_missing_folder_is_made_owner_only_and_a_non_socket_is_not_removed(
    tmp_path: Path,
) -> None:
    where = secure_socket_path(tmp_path / "new" / "h.sock", create=True)
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    os.chmod(tmp_path / "new", 0o700)
    (tmp_path / "new" / "h.sock").write_text("not a socket")
    with pytest.raises(HostSocketError, match="is not a socket"):
        secure_socket_path(tmp_path / "new" / "h.sock", create=True)


@pytest.mark.asyncio
async def test_the_socket_is_owner_only_and_the_peer_is_checked(sock_dir: Path) -> None:
    sock = sock_dir / "h.sock"
    async with Engine() as engine:
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600
            async with await anyio.connect_unix(sock) as stream:
                if sys.platform.startswith("linux"):
                    assert peer_uid(stream) == os.getuid()
                    check_peer(stream)  # the same user: accepted
                    with pytest.raises(HostSocketError, match="another user"):
                        check_peer(stream, own_uid=os.getuid() + 1)
            tg.cancel_scope.cancel()
    assert not sock.exists()


@pytest.mark.asyncio
async def test_connect_to_no_switch_once_is_a_typed_error(sock_dir: Path) -> None:
    async with Engine() as engine:
        with pytest.raises(HostSocketError, match="cannot reach the switch"):
            await connect(engine, sock_dir / "none.sock", once=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x.py"], "give exactly one of --listen PATH and --connect PATH"),
        (["--listen", "/tmp/h.sock", "x.py"], "may be entered by others"),
        (["--connect", "/tmp/rly-no/h.sock"], "give the cartridges to host"),
    ],
)
def test_cartridge_host_usage_errors_are_one_line(args: list[str], message: str) -> None:
    cli = Path(sys.executable).with_name("cartridge")
    done = subprocess.run(
        [str(cli), "host", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


INTEROP = str(Path(__file__).resolve().parents[2] / "cartridges" / "interop.py")


@pytest.mark.asyncio
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_cartridge_host_stops_on_a_signal_and_removes_its_socket(
    sock_dir: Path, signum: signal.Signals
) -> None:
    sock = sock_dir / "h.sock"
    cli = Path(sys.executable).with_name("cartridge")
    async with await anyio.open_process(
        [str(cli), "host", "--listen", str(sock), INTEROP], stderr=subprocess.PIPE
    ) as host:
        with anyio.fail_after(60):
            while not sock.exists():  # noqa: ASYNC110 - waiting on another process's file
                await anyio.sleep(0.05)
        async with Engine() as engine:
            await engine.add_host(sock)
            # routed at once: add_host returned after the identity probe (RLY-6)
            answer = await engine.call("cap:peer-echo", [("media:", b"over the socket")])
            assert answer.data == b"over the socket"
        host.send_signal(signum)
        with anyio.fail_after(60):
            assert await host.wait() == 0
        assert host.stderr is not None
        err = b""
        async for block in host.stderr:
            err += block
    assert f"stopping on {signum.name}" in err.decode()
    assert b"Traceback" not in err
    assert not sock.exists()
