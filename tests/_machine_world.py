"""A small fixed world of caps for the machine tests, as manifest cap JSON, and the same caps
as a reference (capdag) registry for the interop tests and the benchmark.

The caps: the identity; ``words`` (text → a sequence of words); ``upper`` (a word → a word);
``join`` (a sequence of words and a separator → text); ``count`` (text → a number);
``split`` (text → its head, the main output, and optional stats); ``scale`` (a record and a
factor → a record); ``pair`` (two texts, by name → text); ``log`` (no main output); ``odd`` (an ``in=`` no arg
takes on stdin).
"""

from __future__ import annotations

from typing import Any, Final

from cartridge_runtime.manifest import CapDef

TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
SEP: Final = "media:enc=utf-8;sep"
NUMBER: Final = "media:integer;numeric"
RECORD: Final = "media:fmt=json;record"
FACTOR: Final = "media:factor;numeric"


def _arg(name: str, media: str, *, stdin: bool = True, sequence: bool = False,
         required: bool = True) -> dict[str, Any]:  # fmt: skip
    source = {"stdin": media} if stdin else {"cli_flag": f"--{name}"}
    return {"media_urn": media, "name": name, "required": required, "sources": [source],
            "is_sequence": sequence, "streaming": False}  # fmt: skip


def _out(name: str, media: str, *, sequence: bool = False, optional: bool = False) -> Any:
    return {"media_urn": media, "name": name, "output_description": name,
            "optional": optional, "is_sequence": sequence, "streaming": False}  # fmt: skip


def _cap(urn: str, alias: str, args: list[Any], outputs: list[Any]) -> dict[str, Any]:
    return {"urn": urn, "title": alias, "aliases": [alias], "args": args, "outputs": outputs}


IDENTITY: Final = "cap:effect=none"
WORDS: Final = f'cap:in="{TEXT}";op=words;out="{WORD}"'
UPPER: Final = f'cap:in="{WORD}";op=upper;out="{WORD}"'
JOIN: Final = f'cap:in="{WORD}";op=join;out="{TEXT}"'
COUNT: Final = f'cap:in="{TEXT}";op=count;out="{NUMBER}"'
SPLIT: Final = f'cap:in="{TEXT}";op=split;out="{TEXT}"'
SCALE: Final = f'cap:in="{RECORD}";op=scale;out="{RECORD}"'
PAIR: Final = f'cap:in="{TEXT}";op=pair;out="{TEXT}"'
LOG: Final = f'cap:in="{TEXT}";op=log;out=media:void'
ODD: Final = f'cap:in="{TEXT}";op=odd;out="{TEXT}"'

CAP_JSON: Final = [
    _cap(IDENTITY, "identity", [_arg("input", "media:")], [_out("output", "media:")]),
    _cap(WORDS, "words", [_arg("text", TEXT)], [_out("words", WORD, sequence=True)]),
    _cap(UPPER, "upper", [_arg("word", WORD)], [_out("upper", WORD)]),
    _cap(
        JOIN,
        "join",
        [_arg("words", WORD, sequence=True), _arg("sep", SEP, stdin=False)],
        [_out("text", TEXT)],
    ),
    _cap(COUNT, "count", [_arg("text", TEXT)], [_out("count", NUMBER)]),
    _cap(
        SPLIT,
        "split",
        [_arg("text", TEXT)],
        [_out("head", TEXT), _out("stats", RECORD, optional=True)],
    ),
    _cap(
        SCALE,
        "scale",
        [_arg("record", RECORD), _arg("factor", FACTOR, stdin=False)],
        [_out("record", RECORD)],
    ),
    _cap(
        PAIR,
        "pair",
        [_arg("left", TEXT), _arg("right", f"{TEXT};right", stdin=False)],
        [_out("text", TEXT)],
    ),
    # Its out= is void: it has no main output, only a named one.
    _cap(LOG, "log", [_arg("text", TEXT)], [_out("note", TEXT, optional=True)]),
    # Its in= is no arg's stdin source.
    _cap(ODD, "odd", [_arg("text", f"{TEXT};other")], [_out("text", TEXT)]),
]
CAPS: Final = tuple(CapDef.from_json(cap) for cap in CAP_JSON)
#: Header lines for every cap but the identity, by alias.
HEADERS: Final = {
    "words": f"words {WORDS}",
    "upper": f"upper {UPPER}",
    "join": f"join {JOIN}",
    "count": f"count {COUNT}",
    "split": f"split {SPLIT}",
    "scale": f"scale {SCALE}",
    "pair": f"pair {PAIR}",
    "log": f"log {LOG}",
    "odd": f"odd {ODD}",
}


def headers(*aliases: str) -> str:
    """The header lines of the named caps, one per line."""
    return "\n".join(HEADERS[alias] for alias in aliases)


class ReferenceRegistry:
    """The three look-ups capdag's machine parser asks a registry for, over cap JSON: every cap
    by its canonical URN, no cap aliases, and every media URN defined with no validation rules
    (the world of the machine vectors)."""

    def __init__(self, caps: list[Any]) -> None:
        from capdag.cap.definition import Cap

        self._caps = {}
        for data in caps:
            cap = Cap.from_dict(data)
            self._caps[cap.urn.to_string()] = cap

    def get_cached_cap(self, urn: str) -> Any:
        return self._caps.get(urn)

    def resolve_alias_cached(self, name: str) -> str | None:
        return None

    def get_cached_media_def(self, urn: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(validation=None, schema=None, title=urn)


def reference_notation(text: str, caps: list[Any], machines: dict[str, str] | None = None) -> Any:
    """capdag's canonical (line, bracketed) texts for ``text``, or the class name of the error
    it refuses it with; machine headers are read from ``machines`` (none without it)."""
    from capdag.machine import serializer
    from capdag.machine.include import MapMachineSource, NoMachineSource
    from capdag.machine.parser import parse_machine_with_sources

    source: Any = NoMachineSource()
    if machines is not None:
        source = MapMachineSource()
        for reference, notation in machines.items():
            source.insert(reference, notation)
    try:
        machine, _ = parse_machine_with_sources(text, ReferenceRegistry(caps), source, None)
    except Exception as error:
        cause = getattr(error, "__cause__", None) or error
        return type(cause).__name__
    return (
        serializer.to_machine_notation_formatted(machine, serializer.FORMAT_LINE_BASED),
        serializer.to_machine_notation(machine),
    )
