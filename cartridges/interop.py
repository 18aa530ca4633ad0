#!/usr/bin/env python3
"""interop: a cartridge that exercises every part of the runtime, for interoperability tests.

Written only with the public API (:mod:`cartridge_runtime.runtime` and
:mod:`cartridge_runtime.manifest`). Run it with no arguments and it serves Bifaci v6 frames on
stdin/stdout (how a host such as capdag's ``CartridgeHost`` or our engine spawns it); run it with
arguments and it is a command-line tool::

    python cartridges/interop.py --help
    python cartridges/interop.py manifest
    echo "hello world" | python cartridges/interop.py words
    python cartridges/interop.py double '{"value": 21}'
    python cartridges/interop.py concat hello --suffix ' world'
    python cartridges/interop.py file-info README.md

Each cap's first alias is the marker tag its URN carries (``cap:echo``, ``cap:words;...``).
Media used: ``media:`` (any bytes), ``media:enc=utf-8`` (text), ``media:fmt=json;record`` (a
JSON object), ``media:fmt=json;numeric`` (a JSON number) and ``media:enc=utf-8;list`` (a
sequence of text items).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Final, cast

import anyio

from cartridge_runtime.manifest import (
    PLANNABLE_KEY,
    ArgDef,
    CapDef,
    Manifest,
    OutputDef,
    PositionSource,
    StdinSource,
)
from cartridge_runtime.runtime import (
    CartridgeRuntime,
    DryContext,
    InputStream,
    Op,
    OpError,
    WetContext,
)

BYTES: Final = "media:"
TEXT: Final = "media:enc=utf-8"
JSON_RECORD: Final = "media:fmt=json;record"
JSON_NUMBER: Final = "media:fmt=json;numeric"
TEXT_LIST: Final = "media:enc=utf-8;list"
SUFFIX: Final = "media:enc=utf-8;suffix"
FILE_PATH: Final = "media:enc=utf-8;file-path"

#: Smallest write when generating output (a block is reused: bounded memory at any size).
GENERATE_BLOCK: Final = 4_096
GENERATE_PATTERN: Final = b"ABCDEFGH"
#: Every cap here exercises the runtime rather than doing a user's work: none is offered by a
#: planner (a machine or a call still names them).
NOT_PLANNED: Final = {PLANNABLE_KEY: "false"}


# -- manifest --------------------------------------------------------------------------------


def _main_arg(
    media_urn: str, description: str, *, positional: bool = True, streaming: bool = False
) -> ArgDef:
    """The main input: piped on stdin, or (for small values) the first positional argument."""
    sources: list[Any] = [PositionSource(index=0)] if positional else []
    sources.append(StdinSource(media_urn=media_urn))
    return ArgDef(
        media_urn=media_urn,
        name="input",
        sources=sources,
        arg_description=description,
        streaming=streaming,
    )


def _out(
    media_urn: str,
    description: str,
    *,
    is_sequence: bool = False,
    name: str = "output",
    optional: bool = False,
) -> OutputDef:
    return OutputDef(
        media_urn=media_urn,
        name=name,
        output_description=description,
        is_sequence=is_sequence,
        optional=optional,
    )


def _cap(
    marker: str,
    title: str,
    description: str,
    *,
    in_: str,
    out: str,
    args: list[ArgDef],
    outputs: list[OutputDef],
) -> CapDef:
    parts = [f"cap:{marker}"]
    if in_ != BYTES:
        parts.append(f'in="{in_}"')
    if out != BYTES:
        parts.append(f'out="{out}"')
    return CapDef(
        urn=";".join(parts),
        title=title,
        aliases=(marker,),
        cap_description=description,
        args=args,
        outputs=outputs,
        metadata=NOT_PLANNED,
    )


CAPS: Final = (
    _cap(
        "echo",
        "Echo",
        "Returns the input bytes unchanged, streamed.",
        in_=BYTES,
        out=BYTES,
        args=[_main_arg(BYTES, "Any bytes", positional=False, streaming=True)],
        outputs=[_out(BYTES, "The same bytes")],
    ),
    _cap(
        "double",
        "Double",
        'Doubles a number given as JSON {"value": N} (or a bare N).',
        in_=JSON_RECORD,
        out=JSON_NUMBER,
        args=[_main_arg(JSON_RECORD, 'JSON {"value": N}')],
        outputs=[_out(JSON_NUMBER, "2N as JSON")],
    ),
    _cap(
        "words",
        "Words",
        "Splits UTF-8 text into one list item per whitespace-separated word.",
        in_=TEXT,
        out=TEXT_LIST,
        args=[_main_arg(TEXT, "Text")],
        outputs=[_out(TEXT_LIST, "One text item per word", is_sequence=True)],
    ),
    _cap(
        "progress",
        "Progress",
        "Reports N progress steps and N info logs for {\"steps\": N}, then returns 'completed'.",
        in_=JSON_RECORD,
        out=TEXT,
        args=[_main_arg(JSON_RECORD, 'JSON {"steps": N}')],
        outputs=[_out(TEXT, "The text 'completed'")],
    ),
    _cap(
        "fail",
        "Fail",
        "Always fails with code INTEROP_FAIL (class input), quoting the input.",
        in_=TEXT,
        out=TEXT,
        args=[_main_arg(TEXT, "Text to put in the error message")],
        outputs=[_out(TEXT, "Never produced")],
    ),
    _cap(
        "generate",
        "Generate",
        'Streams N bytes of repeating ABCDEFGH for {"size": N}.',
        in_=JSON_RECORD,
        out=BYTES,
        args=[_main_arg(JSON_RECORD, 'JSON {"size": N}')],
        outputs=[_out(BYTES, "N bytes")],
    ),
    _cap(
        "sha256",
        "SHA-256",
        "Hashes the input incrementally; returns the lowercase hex digest.",
        in_=BYTES,
        out=TEXT,
        args=[_main_arg(BYTES, "Any bytes", positional=False, streaming=True)],
        outputs=[_out(TEXT, "Lowercase hex SHA-256 digest")],
    ),
    _cap(
        "split",
        "Split",
        'Upper-cases text; a second output carries {"length": n} (n = characters).',
        in_=TEXT,
        out=TEXT,
        args=[_main_arg(TEXT, "Text")],
        outputs=[
            _out(TEXT, "The text, upper-cased"),
            _out(JSON_RECORD, 'JSON {"length": n}', name="stats"),
        ],
    ),
    _cap(
        "peer-echo",
        "Peer echo",
        "Calls cap:echo on the host (peer invocation) and returns its result.",
        in_=BYTES,
        out=BYTES,
        args=[_main_arg(BYTES, "Any bytes", positional=False)],
        outputs=[_out(BYTES, "What cap:echo returned")],
    ),
    _cap(
        "sleep",
        "Sleep",
        'Sleeps {"ms": N} milliseconds (cancellable), then returns slept-N.',
        in_=JSON_RECORD,
        out=TEXT,
        args=[_main_arg(JSON_RECORD, 'JSON {"ms": N}')],
        outputs=[_out(TEXT, "The text slept-N")],
    ),
    _cap(
        "concat",
        "Concat",
        "Returns the first input followed by the second.",
        in_=TEXT,
        out=TEXT,
        args=[
            _main_arg(TEXT, "The first part"),
            ArgDef.flag(
                SUFFIX, "--suffix", name="suffix", required=True, description="The second part"
            ),
        ],
        outputs=[_out(TEXT, "First then second")],
    ),
    _cap(
        "file-info",
        "File info",
        'Size and SHA-256 of a file: JSON {"size": n, "sha256": hex}.',
        in_=BYTES,
        out=JSON_RECORD,
        args=[
            ArgDef(
                media_urn=FILE_PATH,
                name="file",
                sources=[PositionSource(index=0), StdinSource(media_urn=BYTES)],
                arg_description="A file path (CLI) or the file's bytes (stdin, frames)",
            )
        ],
        outputs=[_out(JSON_RECORD, 'JSON {"size": n, "sha256": hex}')],
    ),
)

MANIFEST: Final = Manifest.build(
    name="interop",
    version="0.1.0",
    channel="nightly",
    description="Interoperability test cartridge for cartridge-runtime",
    caps=CAPS,
)

#: Cap URN of each cap by its alias (canonical text, as the manifest writes it).
URNS: Final = {cap.aliases[0]: cap.urn for cap in CAPS}


# -- helpers ---------------------------------------------------------------------------------


def _json_number(data: bytes, key: str, *, integer: bool = True) -> Any:
    """The number in JSON ``{key: N}`` (or a bare ``N``); an integer unless ``integer=False``.

    :raises OpError: ``INVALID_INPUT``/input when it is neither.
    """
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpError("INVALID_INPUT", f"expected JSON {{{key!r}: N}}: {exc}", "input") from None
    if isinstance(value, dict):
        value = value.get(key)
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise OpError("INVALID_INPUT", f"expected JSON {{{key!r}: N}} with N {kind}", "input")
    return value


async def _main_stream(wet: WetContext) -> InputStream:
    """The request's first input stream (the main input).

    :raises OpError: ``MISSING_INPUT``/input when no stream arrived.
    """
    streams = cast("AsyncGenerator[InputStream, None]", aiter(wet.request.take_input()))
    async with aclosing(streams):  # stop the iteration cleanly after the first stream
        async for stream in streams:
            return stream
    raise OpError("MISSING_INPUT", "no input stream arrived", "input")


async def _main_bytes(wet: WetContext) -> bytes:
    return await (await _main_stream(wet)).collect_bytes()


async def _main_text(wet: WetContext) -> str:
    return await (await _main_stream(wet)).collect_str()


# -- handlers --------------------------------------------------------------------------------


class Echo(Op):
    """Returns its input unchanged, chunk by chunk (constant memory at any size)."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        async for stream in wet.request.take_input():
            async for chunk in stream:
                await out.write(chunk)


class Double(Op):
    """JSON ``{"value": N}`` → JSON ``2N``."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        n = _json_number(await _main_bytes(wet), "value", integer=False)
        await wet.request.output().write(json.dumps(2 * n).encode())


class Words(Op):
    """Text → one sequence item per whitespace-separated word."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        await out.start(is_sequence=True)
        for word in (await _main_text(wet)).split():
            await out.emit_text(word)


class Progress(Op):
    """``{"steps": N}`` → N progress reports and N info logs, then ``completed``; with
    ``"spin": true``, an indeterminate report (``progress(None, ...)``) first; with
    ``"telemetry": true``, a trace event and a metric per step too (REQ-39)."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        data = await _main_bytes(wet)
        steps = _json_number(data, "steps")
        req = wet.request
        if b'"spin": true' in data:
            await req.progress(None, "warming up")
        for i in range(steps):
            await req.progress(i / steps, f"step {i + 1} of {steps}")
            await req.log("info", f"did step {i + 1}")
            if b'"telemetry": true' in data:
                await req.trace("step", index=i + 1)
                await req.metric("steps", 1, kind="progress")
        await req.output().emit_text("completed")


class Fail(Op):
    """Always fails: ERR ``INTEROP_FAIL``, class ``input``, quoting the input text."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = (await _main_text(wet)).strip()
        raise OpError("INTEROP_FAIL", f"asked to fail: {text}", "input")


class Generate(Op):
    """``{"size": N}`` → N bytes of repeating ``ABCDEFGH``, streamed in blocks."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        size = _json_number(await _main_bytes(wet), "size")
        if size < 0:
            raise OpError("INVALID_INPUT", "size must not be negative", "input")
        # One full CHUNK per write: the negotiated chunk size, a whole number of patterns.
        chunk = max(dry.limits.effective_chunk, GENERATE_BLOCK)
        block = GENERATE_PATTERN * (chunk // len(GENERATE_PATTERN))
        out = wet.request.output()
        await out.start()
        sent = 0
        while sent < size:
            n = min(len(block), size - sent)
            await out.write(block[:n] if n < len(block) else block)
            sent += n


class Sha256(Op):
    """Bytes → lowercase hex SHA-256, hashing each chunk as it arrives."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        digest = hashlib.sha256()
        async for stream in wet.request.take_input():
            async for chunk in stream:
                digest.update(chunk)
        await wet.request.output().emit_text(digest.hexdigest())


class Split(Op):
    """Text → upper-cased text, plus ``{"length": n}`` on the second output."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = await _main_text(wet)
        req = wet.request
        await req.output().emit_text(text.upper())
        stats = json.dumps({"length": len(text)}).encode()
        await req.output_for(JSON_RECORD).write(stats)


class PeerEcho(Op):
    """Sends its input to ``cap:echo`` through the host and returns the answer."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        data = await _main_bytes(wet)
        response = await wet.request.peer().call_with_bytes(URNS["echo"], [(BYTES, data)])
        await wet.request.output().write(await response.collect_bytes())


class Sleep(Op):
    """``{"ms": N}`` → waits N ms (a cancel interrupts it), then ``slept-N``."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        ms = _json_number(await _main_bytes(wet), "ms")
        await anyio.sleep(max(ms, 0) / 1000)
        await wet.request.output().emit_text(f"slept-{ms}")


class Concat(Op):
    """Two text inputs (the main one and ``--suffix``) → first then second."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        package = wet.request.take_input()
        first = await package.require_stream_str(TEXT)
        second = await package.require_stream_str(SUFFIX)
        await wet.request.output().emit_text(first + second)


class FileInfo(Op):
    """A file's bytes (read from its path in CLI mode) → ``{"size": n, "sha256": hex}``."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        digest = hashlib.sha256()
        size = 0
        async for chunk in await _main_stream(wet):
            digest.update(chunk)
            size += len(chunk)
        info = {"size": size, "sha256": digest.hexdigest()}
        await wet.request.output().write(json.dumps(info).encode())


HANDLERS: Final[dict[str, type[Op]]] = {
    "echo": Echo,
    "double": Double,
    "words": Words,
    "progress": Progress,
    "fail": Fail,
    "generate": Generate,
    "sha256": Sha256,
    "split": Split,
    "peer-echo": PeerEcho,
    "sleep": Sleep,
    "concat": Concat,
    "file-info": FileInfo,
}


def build_runtime() -> CartridgeRuntime:
    """The runtime with every interop handler registered."""
    runtime = CartridgeRuntime(MANIFEST)
    for alias, op in HANDLERS.items():
        runtime.register_op(URNS[alias], op)
    return runtime


if __name__ == "__main__":
    build_runtime().run()
