"""The actor side of the Ray placement (``CartridgeHost``) without Ray: the same object a Ray
actor wraps, driven in process with every argument and answer passed through ``pickle`` as
Ray would, each call in a thread of its own as in a threaded actor."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from cartridge_runtime.engine.ray._host import THREADS, CartridgeHost


def over_the_wire(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


def collect(stream: Iterator[bytes]) -> bytes:
    return b"".join(over_the_wire(block) for block in stream)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(THREADS) as threads:
        yield threads


def test_writes_land_in_sequence_order_whatever_order_they_start_in(
    pool: ThreadPoolExecutor,
) -> None:
    host = CartridgeHost()
    where = over_the_wire(host.start(["cat"], None))
    assert isinstance(where["pid"], int) and isinstance(where["actor_pid"], int)
    reader = pool.submit(collect, host.stdout(1 << 20))
    # Two threads may start calls out of order: the host writes them by number.
    closing = pool.submit(host.close_stdin, 4)
    writes: list[Future[None]] = [
        pool.submit(host.write, i, over_the_wire(b"%d," % i)) for i in (3, 1, 0, 2)
    ]
    for done in [*writes, closing]:
        done.result(30)
    assert reader.result(30) == b"0,1,2,3,"
    assert pool.submit(host.wait).result(30) == 0


def test_stderr_is_streamed_and_the_exit_status_reported(pool: ThreadPoolExecutor) -> None:
    host = CartridgeHost()
    host.start([sys.executable, "-c", "import sys; sys.stderr.write('oops'); sys.exit(3)"], None)
    assert pool.submit(collect, host.stderr()).result(30) == b"oops"
    assert pool.submit(collect, host.stdout(1024)).result(30) == b""
    assert pool.submit(host.wait).result(30) == 3


def test_a_large_write_waits_for_room_and_lands_whole(pool: ThreadPoolExecutor) -> None:
    host = CartridgeHost()
    host.start(["cat"], None)
    data = bytes(range(256)) * (16 << 12)  # 16 MiB: many times the pipe's buffer
    writing = pool.submit(host.write, 0, data)
    reader = pool.submit(collect, host.stdout(1 << 20))
    writing.result(60)
    pool.submit(host.close_stdin, 1).result(30)
    assert reader.result(60) == data


def test_kill_ends_the_cartridge_and_a_write_after_its_end_is_a_broken_pipe(
    pool: ThreadPoolExecutor,
) -> None:
    host = CartridgeHost()
    host.start(["sleep", "60"], {"PATH": "/usr/bin:/bin"})
    host.kill()
    assert pool.submit(host.wait).result(30) == -9
    host.kill()  # no-op once it ended
    with pytest.raises(BrokenPipeError):
        for i in range(64):  # the first writes may still fit in the dead pipe's buffer
            pool.submit(host.write, i, b"x" * (1 << 20)).result(30)


def test_a_write_after_the_end_of_input_is_a_broken_pipe() -> None:
    host = CartridgeHost()
    host.start(["cat"], None)
    host.close_stdin(0)
    with pytest.raises(BrokenPipeError, match="stdin is closed"):
        host.write(1, b"late")
    assert host.wait() == 0


def test_a_program_that_does_not_exist_is_an_os_error() -> None:
    with pytest.raises(FileNotFoundError):
        CartridgeHost().start(["/no/such/program"], None)


def test_a_host_not_started_says_so() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        CartridgeHost().wait()


def test_a_host_outside_ray_does_not_start_ray(pool: ThreadPoolExecutor) -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process")
    host = CartridgeHost()
    # In a thread, as in the fake backend: a local Ray started there would die with it.
    where = pool.submit(host.start, ["true"], None).result(30)
    assert where["node"] == "" and not ray.is_initialized()
    assert host.wait() == 0


def test_the_cartridge_gets_the_engine_niceness_where_the_node_allows() -> None:
    # Raising a niceness is always allowed; Ray's nice 15 back to the engine's needs the
    # privilege, which the real-Ray tests check where they run with it.
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    host = CartridgeHost()
    where = over_the_wire(host.start(["sleep", "30"], None, None, mine + 3))
    try:
        assert where["niceness"] == mine + 3
        assert os.getpriority(os.PRIO_PROCESS, where["pid"]) == mine + 3
    finally:
        host.kill()
        host.wait()
