"""``tune_allocator``: applies once on glibc Linux, is a harmless no-op elsewhere."""

from __future__ import annotations

import subprocess
import sys

from cartridge_runtime.protocol import tune_allocator


def test_tune_allocator_is_idempotent() -> None:
    first = tune_allocator()
    assert isinstance(first, bool)
    assert tune_allocator() is first


def test_tune_allocator_keeps_large_buffers_working() -> None:
    # In a fresh process, so this test run's allocator is not the one being tuned.
    code = (
        "from cartridge_runtime.protocol import tune_allocator, checksum\n"
        "ok = tune_allocator()\n"
        "blocks = [bytes([i]) * (256 * 1024) for i in range(64)]\n"
        "assert all(len(b) == 256 * 1024 for b in blocks)\n"
        "assert checksum(blocks[1][:4]) == checksum(b'\\x01' * 4)\n"
        "print(ok)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() in ("True", "False")


_SCOPED = r"""
import ctypes, anyio
from cartridge_runtime.engine import Engine, EngineConfig
from cartridge_runtime.protocol import allocator_holders

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def mapped_for(size):
    # How many blocks glibc serves with mmap while `size` bytes are held.
    before = libc.mallinfo2().hblks
    block = bytearray(size)
    during = libc.mallinfo2().hblks
    del block
    return during - before

async def main():
    seen = [allocator_holders(), mapped_for(256 << 10)]
    async with Engine(EngineConfig(tune_allocator=False)):
        seen += [allocator_holders()]  # (glibc's own sliding threshold moved after one free)
    async with Engine():
        async with Engine():
            seen += [allocator_holders()]
        seen += [allocator_holders(), mapped_for(256 << 10)]
    seen += [allocator_holders(), mapped_for(256 << 10)]
    print(*seen)

anyio.run(main)
"""


def test_an_engine_holds_the_tuning_only_while_it_runs() -> None:
    if not sys.platform.startswith("linux"):
        return
    out = subprocess.run(
        [sys.executable, "-c", _SCOPED], capture_output=True, text=True, timeout=60, check=True
    )
    # glibc's default: a 256 KiB block is a mapping of its own; an engine keeps such blocks
    # in the heap while it runs (held by each engine, counted), and gives the default back.
    assert out.stdout.split() == ["0", "1", "0", "2", "1", "0", "0", "1"]


def test_the_watchdog_trims_the_heap_after_calls_not_while_idle() -> None:
    import anyio

    from cartridge_runtime.engine import Engine, InstanceChanged

    trims: list[float] = []

    async def main() -> None:
        from pathlib import Path

        script = Path(__file__).parents[1] / "engine" / "ops_cartridge.py"
        async with Engine(heartbeat_interval=None, activity_timeout=None) as engine:
            dog = engine._watchdog
            dog._trim = lambda: trims.append(now)  # the clock the test gives it
            engine.add_cartridge(script)
            text = "media:enc=utf-8"
            await engine.call(f'cap:in="{text}";op=echo;out="{text}"', [(text, b"x")])
            now = anyio.current_time() + 100
            assert dog.tick(now) == now + 30  # calls were served: trimmed, next look in 30 s
            assert trims == [now]
            now += 30
            assert dog.tick(now) == now + 30  # nothing new: no trim, but still watching
            assert trims == [now - 30]
            async with engine.subscribe() as events:
                engine.kill(engine.status()[0].name)
                with anyio.fail_after(30):
                    async for event in events:  # told once the watchdog knows of the end
                        if isinstance(event, InstanceChanged) and event.state == "died":
                            break
            now += 30
            dog.tick(now)  # an instance ended: its memory is given back
            assert trims == [now - 60, now]

    anyio.run(main)
