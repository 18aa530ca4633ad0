#!/usr/bin/env python3
"""Which of the package's modules one small call runs code in, engine and cartridge.

A profile hook counts the calls made into each module of ``cartridge_runtime`` in the engine
process and, through a small wrapper, in the cartridge process. Two sessions are counted, one
with a few small calls and one with more; a module whose count grows with the calls is one a
call touches (start-up and shutdown cancel out). It uses only the engine's public API, so it
also measures an older checkout put first on ``PYTHONPATH``.

Usage: ``benchmarks/call_modules.py [--calls N]``; prints one table and the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench_common import find_cap, read_manifest  # noqa: E402
from _bench_engine import small_call  # noqa: E402

from cartridge_runtime.engine import Engine  # noqa: E402

CARTRIDGE = HERE.parent / "cartridges" / "interop.py"
CAP = MEDIA = ""


def _module_of(filename: str) -> str | None:
    """The dotted module name of a file inside the package, or None."""
    parts = Path(filename).with_suffix("").parts
    if "cartridge_runtime" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("cartridge_runtime")
    name = ".".join(parts[at:])
    return name.removesuffix(".__init__")


def install_counter() -> collections.Counter[str]:
    """Count calls into the package's modules from now on, in every thread."""
    import threading

    counts: collections.Counter[str] = collections.Counter()
    cache: dict[str, str | None] = {}

    def hook(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            filename = frame.f_code.co_filename
            module = cache.get(filename, "")
            if module == "":
                module = cache[filename] = _module_of(filename)
            if module is not None:
                counts[module] += 1

    sys.setprofile(hook)
    threading.setprofile(hook)
    return counts


_WRAPPER = """
import atexit, json, runpy, sys
sys.path.insert(0, {here!r})
from call_modules import install_counter
counts = install_counter()
out = sys.argv[1]
def dump():
    sys.setprofile(None)
    with open(out, "w") as f:
        json.dump(counts, f)
atexit.register(dump)
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


async def _session(calls: int, workdir: Path, tag: str) -> tuple[dict[str, int], dict[str, int]]:
    wrapper = workdir / "wrap.py"
    wrapper.write_text(_WRAPPER.format(here=str(HERE)))
    cart_out = workdir / f"cartridge-{tag}.json"
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge([sys.executable, str(wrapper), str(cart_out), str(CARTRIDGE)])
        await small_call(engine, CAP, MEDIA)
        counts = install_counter()
        for _ in range(calls):
            await small_call(engine, CAP, MEDIA)
        sys.setprofile(None)
        import threading

        threading.setprofile(None)  # type: ignore[arg-type]
    return dict(counts), json.loads(cart_out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    global CAP, MEDIA
    CAP, MEDIA = find_cap(read_manifest(CARTRIDGE), "double")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        few_engine, few_cart = asyncio.run(_session(2, work, "few"))
        many_engine, many_cart = asyncio.run(_session(2 + args.calls, work, "many"))
    rows = []
    for side, few, many in (
        ("engine", few_engine, many_engine),
        ("cartridge", few_cart, many_cart),
    ):
        for module in sorted(set(many)):
            per_call = (many[module] - few.get(module, 0)) / args.calls
            if per_call > 0.5:
                rows.append((side, module, per_call))
    for side, module, per_call in rows:
        print(f"{side:10} {module:60} {per_call:8.1f} calls into it per call")
    for side in ("engine", "cartridge"):
        print(f"{side}: {sum(1 for r in rows if r[0] == side)} modules per small call")
    print(f"total: {len(rows)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
