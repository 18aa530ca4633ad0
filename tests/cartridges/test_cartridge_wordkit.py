"""The wordkit cartridge: each cap as a command-line tool, in process, and certified."""

from __future__ import annotations

import pytest
from _bundled import CARTRIDGES, assert_conformant, load_cartridge, run_cli

from cartridge_runtime.testing import CartridgeHarness

wordkit = load_cartridge("wordkit")


def test_manifest_is_valid_and_every_cap_has_a_handler() -> None:
    wordkit.MANIFEST.validate()
    wordkit.runtime.check()


@pytest.mark.parametrize(
    ("args", "stdin", "out"),
    [
        (["split"], b"one two", b"one\ntwo\n"),
        (["upper"], b"word", b"WORD"),
        (["route", "--min-length", "2"], b"ox", b"ox"),
        (["pair", "--right", "b"], b"a", b"a-b"),
    ],
)
def test_caps_as_a_command_line_tool(args: list[str], stdin: bytes, out: bytes) -> None:
    done = run_cli("wordkit", *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == out


@pytest.mark.asyncio
async def test_route_fires_one_output_and_bang_fails_typed() -> None:
    async with CartridgeHarness(wordkit.runtime) as h:
        long = await h.call(wordkit.ROUTE, [(wordkit.WORD, b"elephant")])
        short = await h.call(wordkit.ROUTE, [(wordkit.WORD, b"ox")])
        boom = await h.call(wordkit.BANG, [(wordkit.WORD, b"boom")])
        bad = await h.call(wordkit.ROUTE, [(wordkit.WORD, b"ox"), (wordkit.MIN_LENGTH, b"many")])
    # `kept` is the main output (out=); `dropped` is named by its media URN.
    assert list(long.outputs) == [None] and long.data == b"elephant"
    assert list(short.outputs) == [wordkit.DROPPED] and short.outputs[wordkit.DROPPED].data == b"ox"
    assert (
        boom.error is not None and boom.error.code == "BANG" and boom.error.arg_urn == wordkit.WORD
    )
    assert bad.error is not None and bad.error.arg_urn == wordkit.MIN_LENGTH


def test_wordkit_conforms() -> None:
    assert_conformant(CARTRIDGES / "wordkit.py")
