#!/usr/bin/env python3
"""Bytecodes one small call executes, per Python function, engine and cartridge side.

``bench_instructions.py`` gives the machine instructions of a call, a figure with no
breakdown (valgrind sees the interpreter, not the Python functions it runs). This script
gives the breakdown: a trace hook counts the bytecodes each Python function executes (its
own, not its callees') and how often it is called, in the engine process and, through a
small wrapper, in the cartridge process. As in ``call_modules.py``, two sessions are counted,
one with a few small calls and one with more; the difference divided by the extra calls is
the cost of one call, with start-up and shutdown cancelled out. A bytecode costs the
interpreter some tens of instructions, so the table ranks where the instructions of a call
go, without counting them; C functions (the codec, ``dict`` and ``len``) count only as part
of the bytecode that calls them.

Usage: ``benchmarks/call_bytecodes.py [--calls N] [--top N]``; prints one table per side.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench_common import find_cap, read_manifest  # noqa: E402
from _bench_engine import small_call  # noqa: E402

from cartridge_runtime.engine import Engine  # noqa: E402

CARTRIDGE = HERE.parent / "cartridges" / "interop.py"
SLOW_STEP_S = 600.0


def _where(code: Any) -> str:
    """A short name for a code object: its file below the project or site-packages."""
    name = code.co_filename
    for marker in ("/site-packages/", "/lib/python3.", str(HERE.parent) + "/"):
        if marker in name:
            name = name.split(marker, 1)[1]
            if marker.startswith("/lib/python3."):
                name = name.split("/", 1)[-1]
            break
    return f"{name}:{code.co_firstlineno}({code.co_name})"


class Counter:
    """Bytecodes and calls per function, counted from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.ops: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._names: dict[Any, str] = {}

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.ops[self._names[frame.f_code]] += 1
        return self._local

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        code = frame.f_code
        name = self._names.get(code)
        if name is None:
            name = self._names[code] = _where(code)
        self.calls[name] += 1
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._local

    def start(self) -> None:
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)

    def dump(self) -> dict[str, dict[str, int]]:
        return {"ops": dict(self.ops), "calls": dict(self.calls)}


_WRAPPER = """
import atexit, json, runpy, sys
sys.path.insert(0, {here!r})
from call_bytecodes import Counter
counter = Counter()
out = sys.argv[1]
def dump():
    counter.stop()
    with open(out, "w") as f:
        json.dump(counter.dump(), f)
atexit.register(dump)
sys.argv = [sys.argv[2], *sys.argv[3:]]
counter.start()
runpy.run_path(sys.argv[0], run_name="__main__")
"""


async def _session(
    calls: int, workdir: Path, tag: str, cap: str, media: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    wrapper = workdir / "wrap.py"
    wrapper.write_text(_WRAPPER.format(here=str(HERE)))
    cart_out = workdir / f"cartridge-{tag}.json"
    counter = Counter()
    # Traced from its start, the cartridge starts tens of times slower: nothing may time out.
    async with Engine(
        step_timeout=SLOW_STEP_S, shutdown_grace=SLOW_STEP_S, heartbeat_interval=None
    ) as engine:
        engine.add_cartridge([sys.executable, str(wrapper), str(cart_out), str(CARTRIDGE)])
        for _ in range(5):  # started, handshaken, caches warm
            await small_call(engine, cap, media)
        counter.start()
        for _ in range(calls):
            await small_call(engine, cap, media)
        counter.stop()
    return counter.dump(), json.loads(cart_out.read_text())


def per_call(
    few: dict[str, Any], many: dict[str, Any], calls: int
) -> list[tuple[float, float, str]]:
    """(bytecodes, calls, function) of one call, from two sessions ``calls`` calls apart."""
    rows = []
    for name, ops in many["ops"].items():
        extra = (ops - few["ops"].get(name, 0)) / calls
        called = (many["calls"].get(name, 0) - few["calls"].get(name, 0)) / calls
        if extra > 0.5:
            rows.append((extra, called, name))
    return sorted(rows, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="extra calls counted")
    parser.add_argument("--top", type=int, default=40, help="functions shown per side")
    args = parser.parse_args(argv)
    cap, media = find_cap(read_manifest(CARTRIDGE), "double")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        few = asyncio.run(_session(5, work, "few", cap, media))
        many = asyncio.run(_session(5 + args.calls, work, "many", cap, media))
    for index, side in enumerate(("engine", "cartridge")):
        rows = per_call(few[index], many[index], args.calls)
        print(
            f"{side}: {sum(r[0] for r in rows):,.0f} bytecodes and "
            f"{sum(r[1] for r in rows):,.0f} Python calls per small call"
        )
        print(f"{'bytecodes':>10} {'calls':>6}  function")
        for ops, called, name in rows[: args.top]:
            print(f"{ops:10.1f} {called:6.2f}  {name}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
