"""A cartridge for the supervision tests: silent, chatty, memory-hungry, dying and versioned
handlers. Run as a script it serves over stdio; ``build_runtime()`` serves it in process.

``OPS_VERSION`` in the environment is the version the ``version`` cap answers with;
``OPS_TAG`` adds ``tag=<it>`` to every cap URN (a second cartridge whose caps differ).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import (
    CartridgeRuntime,
    DryContext,
    Op,
    OpError,
    WetContext,
)

TEXT = "media:enc=utf-8"
SILENT = f'cap:in="{TEXT}";op=silent;out="{TEXT}"'
CHATTY = f'cap:in="{TEXT}";op=chatty;out="{TEXT}"'
QUICK_SILENT = f'cap:in="{TEXT}";op=quick-silent;out="{TEXT}"'
HOG = f'cap:in="{TEXT}";op=hog;out="{TEXT}"'
ECHO = f'cap:in="{TEXT}";op=echo;out="{TEXT}"'
VERSION = f'cap:in="{TEXT}";op=version;out="{TEXT}"'
DIE = f'cap:in="{TEXT}";op=die;out="{TEXT}"'
DIE_AFTER_OUTPUT = f'cap:in="{TEXT}";op=die-after-output;out="{TEXT}"'
BAD_INPUT = f'cap:in="{TEXT}";op=bad-input;out="{TEXT}"'
DIE_ONCE = f'cap:in="{TEXT}";op=die-once;out="{TEXT}"'


async def _text(wet: WetContext) -> str:
    return (await wet.request.take_input().collect_all_bytes()).decode()


class Silent(Op):
    """Reports progress once, then sends nothing more, ever."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _text(wet)
        await wet.request.progress(0.0, "started")
        await anyio.sleep_forever()


class Chatty(Op):
    """Works for ``input`` seconds in steps of 0.05 s, reporting progress or a log at each."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        seconds = float(await _text(wet))
        steps = max(1, int(seconds / 0.05))
        for i in range(steps):
            await anyio.sleep(0.05)
            if i % 2:
                await wet.request.progress(i / steps, "working")
            else:
                await wet.request.log("info", f"step {i}")
        await wet.request.output().write(b"done")


class Hog(Op):
    """Allocates (and touches) 8 MiB every 20 ms without bound."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _text(wet)
        held = []
        while True:
            held.append(bytearray(os.urandom(1)) * (8 << 20))
            await anyio.sleep(0.02)


class Echo(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().write((await _text(wet)).encode())


class Version(Op):
    """Waits ``input`` seconds, then answers with this process's version and pid."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await anyio.sleep(float(await _text(wet) or 0))
        answer = f"{os.environ.get('OPS_VERSION', '0')} {os.getpid()}"
        await wet.request.output().write(answer.encode())


class Die(Op):
    """The process ends before any output."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _text(wet)
        os._exit(3)


class DieAfterOutput(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _text(wet)
        await wet.request.output().write(b"partial")
        await anyio.sleep(0.2)
        os._exit(4)


class DieOnce(Op):
    """The input names a file: absent, it is made and the process ends; present, the answer
    is ``survived``."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        marker = anyio.Path(await _text(wet))
        if not await marker.exists():
            await marker.write_text("died once")
            os._exit(3)
        await wet.request.output().write(b"survived")


class BadInput(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        raise OpError("BAD_TEXT", f"cannot use {await _text(wet)!r}", "input")


_OPS: dict[str, tuple[str, type[Op]]] = {
    SILENT: ("silent", Silent),
    CHATTY: ("chatty", Chatty),
    QUICK_SILENT: ("quick-silent", Silent),
    HOG: ("hog", Hog),
    ECHO: ("echo", Echo),
    VERSION: ("version", Version),
    DIE: ("die", Die),
    DIE_AFTER_OUTPUT: ("die-after-output", DieAfterOutput),
    BAD_INPUT: ("bad-input", BadInput),
    DIE_ONCE: ("die-once", DieOnce),
}


def tagged(urn: str, tag: str | None) -> str:
    """``urn`` with ``tag=<tag>`` added (unchanged for no tag)."""
    return f"{urn};tag={tag}" if tag else urn


def build_runtime(name: str = "ops", tag: str | None = None) -> CartridgeRuntime:
    caps = []
    for urn, (alias, _) in _OPS.items():
        metadata = {"activity_timeout_secs": "0.2"} if urn == QUICK_SILENT else None
        caps.append(
            CapDef.simple(tagged(urn, tag), alias.title(), aliases=alias, metadata=metadata)
        )
    manifest = Manifest.build(
        name=name, version="1.0.0", description="Supervision test handlers", caps=caps
    )
    runtime = CartridgeRuntime(manifest)
    for urn, (_, op) in _OPS.items():
        runtime.register_op(tagged(urn, tag), op)
    return runtime


if __name__ == "__main__":
    if os.environ.get("OPS_START_DELAY"):  # a slow start-up, such as a model's load
        import time

        time.sleep(float(os.environ["OPS_START_DELAY"]))
    build_runtime(tag=os.environ.get("OPS_TAG")).run()
