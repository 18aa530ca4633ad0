"""A cartridge project outside this repository type-checks against the installed package.

``mypy --strict`` runs in a fresh directory (not the checkout), on a small cartridge with an
async ``Op``, a synchronous ``Op`` and both decorator forms, on the handler guide's two
synchronous examples and on what ``cartridge new`` writes, as written. The blocking
protocols must name every public method of the object each stands for.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime import runtime as rt
from cartridge_runtime.cli.new import render

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "handler-guide.md").read_text(encoding="utf-8")

PROJECT = """
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import (
    BlockingRequest,
    BlockingWetContext,
    CartridgeRuntime,
    DryContext,
    Op,
    Request,
    WetContext,
)

SHOUT = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";shout'
COPY = 'cap:in="media:";out="media:";copy'


class Shout(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = await wet.request.take_input().require_stream_str("media:enc=utf-8")
        await wet.request.output().emit_cbor(text.upper())


class Copy(Op):
    def perform(self, dry: DryContext, wet: BlockingWetContext) -> None:
        req = wet.request
        out = req.output()
        for stream in req.take_input():
            for chunk in stream:
                out.write(chunk)
        req.progress(1.0, "done")
        req.finish(1.0, "copied")


runtime = CartridgeRuntime(
    Manifest.build(
        name="typed",
        version="1.0.0",
        description="typed",
        caps=[CapDef.simple(SHOUT, "Shout", aliases="shout"), CapDef.simple(COPY, "Copy", aliases="copy")],
    )
)
runtime.register_op(SHOUT, Shout)
runtime.register_op(COPY, Copy)


@runtime.op(SHOUT)
async def shout(req: Request) -> None:
    await req.output().emit_cbor(await req.take_input().require_stream_str("media:enc=utf-8"))


@runtime.op(COPY)
def copy(req: BlockingRequest) -> None:
    req.output().write(req.take_input().collect_all_bytes())
"""


def _mypy() -> list[str]:
    exe = Path(sys.executable).with_name("mypy")
    if exe.exists():
        return [str(exe)]
    if shutil.which("mypy"):
        return ["mypy"]
    pytest.skip("mypy is not installed")


def _guide_block(heading: str) -> str:
    section = GUIDE.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def _check(tmp_path: Path, files: dict[str, str]) -> None:
    for name, code in files.items():
        (tmp_path / name).write_text(textwrap.dedent(code), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    proc = subprocess.run(
        [*_mypy(), "--strict", "--no-incremental", *files],
        cwd=tmp_path,  # outside the checkout: the package is found as installed
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_outside_project_type_checks_strict(tmp_path: Path) -> None:
    _check(
        tmp_path,
        {
            "cartridge.py": PROJECT,
            "guide_decorator.py": _guide_block("### The decorator form"),
            "guide_sync.py": _guide_block("## Synchronous handlers"),
            # what `cartridge new` writes, as written
            "tpl.py": render("cartridge.py.tmpl", "tpl"),
            "test_tpl.py": render("test_cartridge.py.tmpl", "tpl"),
        },
    )


def test_installed_package_is_visible_to_type_checkers() -> None:
    """The package ships ``py.typed`` and is found through a plain path, not an import hook
    (mypy cannot follow the hook of setuptools' default editable mode)."""
    import cartridge_runtime

    pkg = Path(cartridge_runtime.__file__).parent
    assert (pkg / "py.typed").exists()
    assert str(pkg.parent) in [str(Path(p).resolve()) for p in sys.path if p]


BLOCKING = [
    (rt.Request, rt.BlockingRequest),
    (rt.InputPackage, rt.BlockingInputPackage),
    (rt.InputStream, rt.BlockingInputStream),
    (rt.OutputStream, rt.BlockingOutputStream),
    (rt.PeerInvoker, rt.BlockingPeerInvoker),
    (rt.PeerCall, rt.BlockingPeerCall),
    (rt.PeerResponse, rt.BlockingPeerResponse),
    (rt.WetContext, rt.BlockingWetContext),
    (rt.GraphGrowth, rt.BlockingGraphGrowth),
    (rt.GraphBatch, rt.BlockingGraphBatch),
]


@pytest.mark.parametrize(("real", "blocking"), BLOCKING, ids=[b.__name__ for _, b in BLOCKING])
def test_blocking_protocol_names_every_public_method(real: type, blocking: type) -> None:
    public = {
        name
        for name, value in inspect.getmembers(real)
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    missing = sorted(n for n in public if not hasattr(blocking, n))
    assert missing == []
    for real_name, proto_name in (("__aiter__", "__iter__"),):
        if hasattr(real, real_name):
            assert hasattr(blocking, proto_name)
