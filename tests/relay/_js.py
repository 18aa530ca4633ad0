"""Run the relay's JavaScript peers (``tests/relay/js/``) from a test: a node process whose
stdout is one JSON event per line and whose stdin takes one JSON command per line."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

JS = Path(__file__).resolve().parent / "js"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

Event = dict[str, Any]


class JsPeer:
    """One node process: the events it printed so far, and a way to wait for the next one."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.events: list[Event] = []
        self._seen = anyio.Event()

    async def _read(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        async for block in self.process.stdout:
            pending += block
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self.events.append(json.loads(line))
            self._seen.set()
            self._seen = anyio.Event()

    async def wait(self, match: Callable[[Event], bool], *, within: float = 15.0) -> Event:
        """The first event (printed so far or to come) that ``match`` accepts."""
        with anyio.fail_after(within):
            while True:
                for event in self.events:
                    if match(event):
                        return event
                await self._seen.wait()

    async def wait_for(self, name: str, *, within: float = 15.0, **fields: Any) -> Event:
        """The first event called ``name`` whose fields include ``fields``."""
        return await self.wait(
            lambda e: e.get("event") == name and all(e.get(k) == v for k, v in fields.items()),
            within=within,
        )

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.get("event") == name]

    async def command(self, **cmd: Any) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(cmd).encode() + b"\n")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()


@contextlib.asynccontextmanager
async def js_peer(script: str, *args: str) -> AsyncIterator[JsPeer]:
    """``node tests/relay/js/SCRIPT ARGS...``, killed when the block ends."""
    process = await anyio.open_process(["node", str(JS / script), *args])
    peer = JsPeer(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer._read)
            try:
                yield peer
            finally:
                peer.kill()
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()
