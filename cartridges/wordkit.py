#!/usr/bin/env python3
"""wordkit: small word caps made to be composed into machines.

Each cap does one thing to text or to words, so that machines show the three shapes the
notation derives: a chain (``doc -> split -> ws``), a per-item map (``ws -> upper -> loud``
runs once per word) and a router with optional outputs (``w -> route -> (kept=k,
dropped=d)``: a word takes one of the two, and everything downstream of the other is skipped
for it). Written only with the public API; ``python cartridges/wordkit.py --help`` lists the
caps as a command-line tool.

Media: ``media:enc=utf-8`` (text), ``media:enc=utf-8;word`` (one word), and the router's
``media:enc=utf-8;kept;word`` / ``media:dropped;enc=utf-8;word``. ``join`` and ``count`` take a
list of any text items (``media:enc=utf-8``), so another cartridge's lines, names or records
compose with them without being renamed to words.
"""

from __future__ import annotations

import os
from typing import Final

import anyio

from cartridge_runtime.manifest import PLANNABLE_KEY, ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, OpError, WetContext

TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
KEPT: Final = "media:enc=utf-8;kept;word"
DROPPED: Final = "media:dropped;enc=utf-8;word"
SEP: Final = "media:enc=utf-8;sep"
COUNT: Final = "media:integer;numeric"
MIN_LENGTH: Final = "media:integer;min-length"

SPLIT: Final = f'cap:in="{TEXT}";op=split;out="{WORD}"'
UPPER: Final = f'cap:in="{WORD}";op=upper;out="{WORD}"'
ROUTE: Final = f'cap:in="{WORD}";op=route;out="{KEPT}"'
JOIN: Final = f'cap:in="{TEXT}";op=join;out="{TEXT}"'
COUNT_WORDS: Final = f'cap:in="{TEXT}";op=count;out="{COUNT}"'
BANG: Final = f'cap:in="{WORD}";op=bang;out="{WORD}"'
SLOW: Final = f'cap:in="{WORD}";op=slow;out="{WORD}"'
FLAKY: Final = f'cap:in="{WORD}";op=flaky;out="{WORD}"'
PAIR: Final = f'cap:in="{WORD}";op=pair;out="{WORD}"'
QUIET: Final = f'cap:in="{WORD}";op=quiet;out="{WORD}"'
RIGHT: Final = "media:enc=utf-8;right;word"

#: A file the flaky cap creates on its first call (and dies); later calls succeed.
FLAKY_MARK_ENV: Final = "WORDKIT_FLAKY_MARK"
#: A file every call appends a line to (``op word``, and ``slow-end word`` when slow ends).
CALL_LOG_ENV: Final = "WORDKIT_CALL_LOG"


def _out(media: str, name: str, description: str, **kw: bool) -> OutputDef:
    return OutputDef(media_urn=media, name=name, output_description=description, **kw)


#: The metadata of a cap made for tests (failures, pauses, crashes): never offered by a planner.
TEST_ONLY: Final = {PLANNABLE_KEY: "false"}


def _word_cap(
    urn: str, alias: str, title: str, description: str, out: OutputDef, *, test_only: bool = False
) -> CapDef:
    return CapDef(
        urn=urn,
        title=title,
        aliases=(alias,),
        cap_description=description,
        args=[ArgDef.stdin(WORD, name="word", description="One word")],
        outputs=[out],
        metadata=TEST_ONLY if test_only else None,
    )


CAPS: Final = (
    CapDef(
        urn=SPLIT,
        title="Split",
        aliases=("split",),
        cap_description="Splits text into one item per whitespace-separated word.",
        args=[ArgDef.stdin(TEXT, name="text", description="Text")],
        outputs=[_out(WORD, "words", "One item per word", is_sequence=True)],
    ),
    _word_cap(UPPER, "upper", "Upper", "Upper-cases one word.", _out(WORD, "upper", "The word")),
    CapDef(
        urn=ROUTE,
        title="Route",
        aliases=("route",),
        cap_description=(
            "Sends a word to 'kept' when it has at least min_length letters (default 4), "
            "else to 'dropped'; the other output does not fire."
        ),
        args=[
            ArgDef.stdin(WORD, name="word", description="One word"),
            ArgDef.flag(MIN_LENGTH, "--min-length", name="min_length", description="Letters"),
        ],
        outputs=[
            _out(KEPT, "kept", "The word, when long enough", optional=True),
            _out(DROPPED, "dropped", "The word, when too short", optional=True),
        ],
    ),
    CapDef(
        urn=JOIN,
        title="Join",
        aliases=("join",),
        cap_description="Joins text items into text, with sep between them (default a space).",
        args=[
            ArgDef.stdin(TEXT, name="words", description="Text items", is_sequence=True),
            ArgDef.flag(SEP, "--sep", name="sep", description="Separator"),
        ],
        outputs=[_out(TEXT, "text", "The words joined")],
    ),
    CapDef(
        urn=COUNT_WORDS,
        title="Count",
        aliases=("count",),
        cap_description="Counts text items.",
        args=[ArgDef.stdin(TEXT, name="words", description="Text items", is_sequence=True)],
        outputs=[_out(COUNT, "count", "How many")],
    ),
    _word_cap(
        BANG,
        "bang",
        "Bang",
        "Fails with BANG (class input) for the word 'boom'; returns any other word.",
        _out(WORD, "word", "The word"),
        test_only=True,
    ),
    _word_cap(
        SLOW,
        "slow",
        "Slow",
        "Returns the word after a pause (WORDKIT_SLOW_SECONDS, default 0.05 s).",
        _out(WORD, "word", "The word"),
        test_only=True,
    ),
    CapDef(
        urn=PAIR,
        title="Pair",
        aliases=("pair",),
        cap_description="Joins two words with a hyphen: word-right.",
        args=[
            ArgDef.stdin(WORD, name="word", description="The first word"),
            ArgDef.flag(
                RIGHT,
                "--right",
                name="right",
                description="The second word",
                required=True,
                accepts=WORD,
            ),
        ],
        outputs=[_out(WORD, "pair", "word-right")],
        metadata=TEST_ONLY,
    ),
    _word_cap(
        QUIET,
        "quiet",
        "Quiet",
        "Reads a word and writes nothing (its output is required: it is an empty value).",
        _out(WORD, "word", "Nothing"),
        test_only=True,
    ),
    _word_cap(
        FLAKY,
        "flaky",
        "Flaky",
        f"Dies on its first call when ${FLAKY_MARK_ENV} names a file that does not exist yet.",
        _out(WORD, "word", "The word"),
        test_only=True,
    ),
)

MANIFEST: Final = Manifest.build(
    name="wordkit",
    version="1.0.0",
    description="Word caps to compose into machines",
    caps=list(CAPS),
)


async def _log(line: str) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        async with await anyio.open_file(path, "a") as f:
            await f.write(line + "\n")


async def _word(wet: WetContext, op: str) -> str:
    word = await wet.request.take_input().require_stream_str(WORD)
    await _log(f"{op} {word}")
    return word


class Split(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = await wet.request.take_input().require_stream_str(TEXT)
        out = wet.request.output()
        await out.start(is_sequence=True)
        for word in text.split():
            await out.emit_text(word)


class Upper(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().emit_text((await _word(wet, "upper")).upper())


class Route(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        package = wet.request.take_input()
        word = await package.require_stream_str(WORD)
        await _log(f"route {word}")
        given = await package.find_stream_str(MIN_LENGTH)
        try:
            least = int(given) if given is not None else 4
        except ValueError:
            raise OpError(
                "BAD_MIN_LENGTH", "min_length is a whole number", "input", arg_urn=MIN_LENGTH
            ) from None
        if len(word) >= least:
            await wet.request.output_for(KEPT).emit_text(word)
        else:
            await wet.request.output_for(DROPPED).emit_text(word)


class Join(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        package = wet.request.take_input()
        words: list[str] = []
        sep = " "
        async for stream in package:
            if not stream.is_sequence:
                sep = (await stream.collect_bytes()).decode("utf-8")
                continue
            async for value in stream.values():
                words.append(value.decode("utf-8") if isinstance(value, bytes) else str(value))
        await wet.request.output().emit_text(sep.join(words))


class Count(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        n = 0
        async for stream in wet.request.take_input():
            async for _ in stream.values():
                n += 1
        await wet.request.output().emit_text(str(n))


class Bang(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        word = await _word(wet, "bang")
        if word == "boom":
            raise OpError("BANG", "the word is 'boom'", "input", arg_urn=WORD)
        await wet.request.output().emit_text(word)


class Slow(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        word = await _word(wet, "slow")
        await anyio.sleep(float(os.environ.get("WORDKIT_SLOW_SECONDS", "0.05")))
        await _log(f"slow-end {word}")
        await wet.request.output().emit_text(word)


class Flaky(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        word = await _word(wet, "flaky")
        mark = os.environ.get(FLAKY_MARK_ENV)
        if mark and not await anyio.Path(mark).exists():
            await anyio.Path(mark).write_text("died once\n")
            os._exit(3)
        await wet.request.output().emit_text(word)


class Pair(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        package = wet.request.take_input()
        word = await package.require_stream_str(WORD)
        right = await package.require_stream_str(RIGHT)
        await _log(f"pair {word}")
        await wet.request.output().emit_text(f"{word}-{right}")


class Quiet(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await _word(wet, "quiet")


runtime = CartridgeRuntime(MANIFEST)
for _urn, _op in (
    (SPLIT, Split),
    (UPPER, Upper),
    (ROUTE, Route),
    (JOIN, Join),
    (COUNT_WORDS, Count),
    (BANG, Bang),
    (SLOW, Slow),
    (FLAKY, Flaky),
    (PAIR, Pair),
    (QUIET, Quiet),
):
    runtime.register_op(_urn, _op)

if __name__ == "__main__":
    runtime.run()
