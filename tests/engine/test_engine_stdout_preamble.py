"""Text a cartridge prints on stdout before its first frame (a library greeting on import, a
``print()`` before ``run()``) is taken as its log, with a warning, and the frames after it
are read as usual."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import Engine, SpawnFailed
from cartridge_runtime.engine._connection._preamble import MAX_PREAMBLE_BYTES, StdoutPreamble
from cartridge_runtime.protocol import (
    DEFAULT_MAX_FRAME,
    FrameDecoder,
    MessageId,
    ProtocolError,
    encode_frame,
    frames,
)

FRAMES = b"".join(encode_frame(frames.heartbeat(MessageId.new())) for _ in range(3))
TEXT = b"Loading model weights...\n\n  caf\xc3\xa9 ready\tok\r\n"


class Sink:
    """What the filter hands on, decoded, and the lines it took."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder(DEFAULT_MAX_FRAME)
        self.blocks: list[bytes | memoryview] = []
        self.lines: list[bytes] = []
        self.preamble = StdoutPreamble(self.feed, self.lines.append)
        self.error: ProtocolError | None = None

    def feed(self, data: bytes | memoryview) -> None:
        self.blocks.append(data)
        try:
            self.decoder.feed(bytes(data))
        except ProtocolError as exc:
            self.error = exc

    def frames(self) -> int:
        if self.error is not None:
            raise self.error
        n = 0
        while self.decoder.next_frame() is not None:
            n += 1
        return n


def test_lines_of_text_then_frames_split_at_every_offset() -> None:
    stream = TEXT + FRAMES
    for cut in range(len(stream) + 1):
        sink = Sink()
        for part in (stream[:cut], stream[cut:]):
            if part:  # an empty block is the end of file
                sink.preamble.feed(memoryview(bytearray(part)))
        sink.preamble.feed(b"")
        assert b"".join(sink.lines) == TEXT, cut
        assert sink.lines[0] == b"Loading model weights...\n"
        assert sink.frames() == 3 and sink.decoder.at_frame_boundary
        assert sink.preamble.through and not sink.preamble.only_text


def test_a_stream_that_starts_with_a_frame_is_passed_on_as_it_came() -> None:
    sink = Sink()
    block = memoryview(bytearray(FRAMES))
    sink.preamble.feed(block)
    assert sink.blocks == [block] and sink.blocks[0] is block  # no copy
    later = memoryview(bytearray(b"text after frames\n"))
    sink.preamble.feed(later)
    assert sink.blocks[-1] is later and sink.lines == []  # only before the first frame


def test_bytes_that_are_not_text_go_to_the_decoder() -> None:
    sink = Sink()
    sink.preamble.feed(b"\x7f\xff\xff\xffjunk")
    assert sink.lines == [] and sink.preamble.through
    with pytest.raises(ProtocolError):
        sink.frames()


def test_text_past_the_limit_is_left_to_the_decoder() -> None:
    sink = Sink()
    line = b"x" * 99 + b"\n"
    sink.preamble.feed(line * (MAX_PREAMBLE_BYTES // len(line) + 5))
    assert sum(map(len, sink.lines)) <= MAX_PREAMBLE_BYTES and sink.preamble.through
    with pytest.raises(ProtocolError):
        sink.frames()


def test_a_line_cut_by_end_of_file_is_still_taken() -> None:
    sink = Sink()
    sink.preamble.feed(b"usage: frob")
    assert sink.preamble.only_text and sink.lines == []
    sink.preamble.feed(b"")
    assert sink.lines == [b"usage: frob"] and sink.blocks == [b""]


CAP = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";greeter'

CARTRIDGE = textwrap.dedent(
    """
    print("Loading model weights...", flush=True)  # a library greeting on import
    print("caf\\u00e9 ready", flush=True)
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    CAP = {cap!r}
    runtime = CartridgeRuntime(
        Manifest.build(name="greeter", version="1.0.0", description="greets on import",
                       caps=[CapDef.simple(CAP, "Greeter", aliases="greeter")])
    )

    @runtime.op(CAP)
    async def greeter(req):
        text = await req.take_input().require_stream_str("media:enc=utf-8")
        await req.output().emit_cbor(text.upper())

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.mark.asyncio
async def test_a_print_at_import_time_is_logged_and_the_cartridge_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "greeter.py"
    script.write_text(CARTRIDGE.format(cap=CAP))
    caplog.set_level(logging.WARNING, logger="cartridge_runtime.engine")
    async with Engine(log_dir=tmp_path / "logs") as e:
        name = e.add_cartridge(script)
        result = await e.call_bytes(CAP, [("media:enc=utf-8", "hi")])
        assert result.data == b"HI"
        tail = e.status()[0].stderr_tail
        assert e.stats().protocol_errors == 0
    assert "stdout: Loading model weights...\nstdout: café ready" in tail
    log = (tmp_path / "logs" / f"{name}.stderr.log").read_text()
    assert "stdout: Loading model weights..." in log
    warnings = [
        r.getMessage() for r in caplog.records if "before its first frame" in r.getMessage()
    ]
    assert len(warnings) == 1 and "'Loading model weights...'" in warnings[0]


@pytest.mark.asyncio
async def test_a_program_that_prints_and_exits_is_not_a_cartridge() -> None:
    program = [sys.executable, "-c", "print('usage: frobnicate FILE')"]
    async with Engine() as e:
        e.add_cartridge(program, known_caps=[CAP])
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes(CAP, [("media:enc=utf-8", "x")])
    assert info.value.step == "hello"
    assert "not a cartridge" in info.value.message
    assert "stdout: usage: frobnicate FILE" in info.value.message
