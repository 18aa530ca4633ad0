"""The bundled ``join`` and ``count`` take a list of any text items, so a user cartridge's own
text types compose with them without renaming (here lines from another cartridge)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
WORDKIT = ROOT / "cartridges" / "wordkit.py"

_LINES = textwrap.dedent(
    """
    from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
    from cartridge_runtime.runtime import CartridgeRuntime, Request

    TEXT = "media:enc=utf-8"
    LINE = "media:enc=utf-8;line"
    CAP = 'cap:in="media:enc=utf-8";op=lines;out="media:enc=utf-8;line"'
    runtime = CartridgeRuntime(Manifest.build(name="lines", version="1.0.0", description="l",
        caps=[CapDef(urn=CAP, title="Lines", aliases=("lines",), args=[ArgDef.stdin(TEXT)],
              outputs=[OutputDef(media_urn=LINE, name="lines", output_description="lines",
                                 is_sequence=True)])]))

    @runtime.op(CAP)
    async def lines(req: Request) -> None:
        text = await req.take_input().require_stream_str(TEXT)
        out = req.output()
        for line in text.splitlines():
            await out.emit_list_item(line)

    if __name__ == "__main__":
        runtime.run()
    """
)

MACHINE = (
    'lines cap:in="media:enc=utf-8";op=lines;out="media:enc=utf-8;line"\n'
    'join cap:in="media:enc=utf-8";op=join;out="media:enc=utf-8"\n'
    'count cap:in="media:enc=utf-8";op=count;out="media:integer;numeric"\n'
    "doc -> lines -> ls\n"
    '(words=ls, sep=" / ") -> join -> joined\n'
    "ls -> count -> how_many\n"
)


@pytest.mark.asyncio
async def test_join_and_count_take_another_cartridges_text_items(tmp_path: Path) -> None:
    script = tmp_path / "lines.py"
    script.write_text(_LINES)
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], name="lines")
        engine.add_cartridge(WORDKIT)
        result = await engine.run_machine(MACHINE, {"doc": "first line\nsecond line\nthird"})
    assert result.outputs["joined"].data == b"first line / second line / third"
    assert result.outputs["how_many"].data == b"3"
