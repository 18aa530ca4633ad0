"""Mistakes caught where they are made: ``run()`` refuses a cartridge whose manifest and
handlers do not fit, with one line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import EXIT_FAILURE, CartridgeRuntime, Request, SetupError
from cartridge_runtime.testing import check_cartridge

A = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";shout'
B = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";whisper'
C = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";mumble'


async def _handler(req: Request) -> None:
    await req.output().emit_cbor("x")


def _runtime(caps: list[CapDef], handlers: list[str]) -> CartridgeRuntime:
    rt = CartridgeRuntime(Manifest.build(name="t", version="1.0.0", description="t", caps=caps))
    for urn in handlers:
        rt.op(urn)(_handler)
    return rt


def test_a_well_formed_cartridge_passes() -> None:
    _runtime(
        [CapDef.simple(A, "A", aliases="a"), CapDef.simple(B, "B", aliases="b")], [A, B]
    ).check()


def test_two_caps_with_one_alias_are_refused() -> None:
    rt = _runtime(
        [CapDef.simple(A, "A", aliases="say"), CapDef.simple(B, "B", aliases="say")], [A, B]
    )
    with pytest.raises(SetupError) as info:
        rt.check()
    assert "alias 'say' names two caps" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_declared_cap_without_a_handler_is_refused() -> None:
    rt = _runtime([CapDef.simple(A, "A", aliases="a"), CapDef.simple(B, "B", aliases="b")], [A])
    with pytest.raises(SetupError) as info:
        rt.check()
    assert f"declared cap {B} has no handler" in str(info.value)


def test_a_handler_for_an_undeclared_cap_is_refused() -> None:
    rt = _runtime([CapDef.simple(A, "A", aliases="a")], [A, C])
    with pytest.raises(SetupError) as info:
        rt.check()
    assert f"registered for {C}, which the manifest does not declare" in str(info.value)


def test_every_problem_is_named_in_one_line() -> None:
    rt = _runtime([CapDef.simple(A, "A", aliases="x"), CapDef.simple(B, "B", aliases="x")], [A, C])
    with pytest.raises(SetupError) as info:
        rt.check()
    text = str(info.value)
    assert "alias 'x'" in text and "no handler" in text and "does not declare" in text
    assert "\n" not in text


BROKEN = textwrap.dedent(
    f"""
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    runtime = CartridgeRuntime(Manifest.build(
        name="broken", version="1.0.0", description="t",
        caps=[CapDef.simple({A!r}, "A", aliases="a"), CapDef.simple({B!r}, "B", aliases="a")],
    ))

    @runtime.op({A!r})
    async def a(req):
        await req.output().emit_cbor("x")

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    return path


@pytest.mark.parametrize("argv", [[], ["a"], ["manifest"]], ids=["cbor", "cli", "manifest"])
def test_run_refuses_to_start_with_one_line(broken: Path, argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(broken), *argv],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == EXIT_FAILURE
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cartridge: cartridge 'broken' cannot start: ")
    assert "alias 'a' names two caps" in lines[0] and "has no handler" in lines[0]


def test_conformance_fails_such_a_cartridge(broken: Path) -> None:
    with pytest.raises(AssertionError):
        check_cartridge(broken, only=["HSK-2"], timeout=10)
