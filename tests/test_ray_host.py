"""The actor side of the Ray placement (``CartridgeHost``) without Ray: the same object a Ray
actor wraps, driven in process with every argument and answer passed through ``pickle`` as
Ray would, on asyncio (an actor's loop)."""

from __future__ import annotations

import asyncio
import pickle
import sys
from typing import Any

import pytest

from cartridge_runtime.engine.ray._host import CartridgeHost


def over_the_wire(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


async def collect(stream: Any) -> bytes:
    return b"".join([over_the_wire(block) async for block in stream])


@pytest.mark.asyncio
async def test_writes_land_in_sequence_order_whatever_order_they_start_in() -> None:
    host = CartridgeHost()
    where = over_the_wire(await host.start(["cat"], None))
    assert isinstance(where["pid"], int) and isinstance(where["actor_pid"], int)
    reader = asyncio.ensure_future(collect(host.stdout(1 << 20)))
    # An async actor may start calls out of order: the host writes them by number.
    writes = [host.write(i, over_the_wire(b"%d," % i)) for i in (3, 1, 0, 2)]
    closing = host.close_stdin(4)
    await asyncio.wait_for(asyncio.gather(*writes, closing), 30)
    assert await asyncio.wait_for(reader, 30) == b"0,1,2,3,"
    assert await asyncio.wait_for(host.wait(), 30) == 0


@pytest.mark.asyncio
async def test_stderr_is_streamed_and_the_exit_status_reported() -> None:
    host = CartridgeHost()
    await host.start(
        [sys.executable, "-c", "import sys; sys.stderr.write('oops'); sys.exit(3)"], None
    )
    assert await asyncio.wait_for(collect(host.stderr()), 30) == b"oops"
    assert await asyncio.wait_for(collect(host.stdout(1024)), 30) == b""
    assert await asyncio.wait_for(host.wait(), 30) == 3


@pytest.mark.asyncio
async def test_kill_ends_the_cartridge_and_a_write_after_its_end_is_a_broken_pipe() -> None:
    host = CartridgeHost()
    await host.start(["sleep", "60"], {"PATH": "/usr/bin:/bin"})
    host.kill()
    assert await asyncio.wait_for(host.wait(), 30) == -9
    host.kill()  # no-op once it ended
    with pytest.raises(BrokenPipeError):
        for i in range(64):  # the first writes may still fit in the dead pipe's buffer
            await asyncio.wait_for(host.write(i, b"x" * (1 << 20)), 30)


@pytest.mark.asyncio
async def test_a_program_that_does_not_exist_is_an_os_error() -> None:
    with pytest.raises(FileNotFoundError):
        await CartridgeHost().start(["/no/such/program"], None)
