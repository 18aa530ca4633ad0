"""A host of installed cartridges (``cartridge host --from-dir``) and a plan made over a host's
caps: the switch engine has no cartridge of its own, everything it plans and calls is hosted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
WORDKIT = ROOT / "cartridges" / "wordkit.py"
TEXT = "media:enc=utf-8"


@pytest.mark.asyncio
async def test_a_host_of_a_folder_serves_what_it_found_and_plans_route_through_it(
    sock_dir: Path, tmp_path: Path
) -> None:
    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy(WORDKIT, installed / "wordkit.py")
    sock = sock_dir / "found.sock"
    cli = Path(sys.executable).with_name("cartridge")
    async with await anyio.open_process(
        [str(cli), "host", "--listen", str(sock), "--from-dir", str(installed)],
        stderr=subprocess.DEVNULL,
    ) as host:
        try:
            with anyio.fail_after(60):
                while not sock.exists():  # noqa: ASYNC110 - another process makes the file
                    await anyio.sleep(0.05)
            async with Engine() as engine:
                assert await engine.add_host(sock) == "found"
                (view,) = engine.hosts()
                assert [r.id for r in view.inventory.records] == ["wordkit"]
                plans = await engine.plan(b"make it loud", "media:enc=utf-8;word", media=TEXT)
                assert plans, "no plan over the host's caps"
                (node,) = plans[0].machine.inputs
                result = await engine.run_machine(plans[0].machine, {node.name: b"make it loud"})
                (out,) = result.outputs.values()
                values = [i.value for i in out.items]
                assert [v.decode() if isinstance(v, bytes) else v for v in values] == [
                    "make",
                    "it",
                    "loud",
                ]
                assert {s.name for s in engine.status()} == {"found/wordkit"}
        finally:
            host.send_signal(15)
            with anyio.fail_after(60):
                await host.wait()
