"""Outputs held to their media definitions when they end (HST-24).

A media definition may carry validation rules (``min``, ``max``, ``min_length``,
``max_length``, ``pattern``, ``allowed_values``) and a JSON Schema (Draft 7). When a call's
output whose media URN has such a definition ends, its value is checked; the first failure
fails the call with :class:`OutputInvalid` (code ``OUTPUT_INVALID``, class ``internal``: the
cartridge broke the contract its media declares), naming the output, the JSON pointer of the
failure, the rule or schema keyword, and the item of a sequence output.

Definitions come from the application (``EngineConfig.media``), which win, and from the
cartridge's manifest (``media_defs``). Nothing is looked at per frame: a collected result is
checked once it is whole, a streamed one keeps the pieces of checked outputs only; a call
whose cartridge and engine have no definition carries no checker at all. An ERR is never
checked. The check can be turned off per engine (``EngineConfig.check_outputs``), per
cartridge (``add_cartridge(check_outputs=False)``) and per call (``call(check_outputs=False)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..protocol import AttributionClass, ErrorCode
from ..urn import MediaUrn, UrnError
from ._errors import CallError
from ._events import CallEvent, OutputData, OutputEnded, OutputItem, OutputResult, OutputStarted
from ._schema_fast import compile_schema

if TYPE_CHECKING:
    from ..machine import MediaDef

__all__ = ("OutputChecks", "OutputInvalid", "OutputWatch", "check_outputs")


class OutputInvalid(CallError):
    """A call's output broke the validation rules or the JSON Schema of its media definition.

    :ivar cap: the cap called.
    :ivar output: the output's name (``None`` for an unnamed one).
    :ivar media_urn: the output's media URN.
    :ivar pointer: the JSON pointer (RFC 6901) of the first failure in the value (``""``: the
        value itself).
    :ivar rule: the rule or schema keyword that failed (``maximum value 10``, ``required``...).
    :ivar item: the index of the failing item in a sequence output, else ``None``.
    :ivar step: the machine step whose call it was, when a machine ran it, else ``None``.
    """

    def __init__(
        self,
        cap: str,
        output: str | None,
        media_urn: str,
        pointer: str,
        rule: str,
        *,
        item: int | None = None,
        step: str | None = None,
    ) -> None:
        where = f"output '{output}'" if output is not None else "the output"
        if item is not None:
            where += f", item {item}"
        at = f" at '{pointer}'" if pointer else ""
        super().__init__(
            ErrorCode.OUTPUT_INVALID,
            AttributionClass.INTERNAL,
            f"{where} of {cap} ({media_urn}) breaks its media definition{at}: {rule}",
        )
        self.cap = cap
        self.output = output
        self.media_urn = media_urn
        self.pointer = pointer
        self.rule = rule
        self.item = item
        self.step = step


def _pointer(path: Iterable[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class _Definition:
    """One definition, ready to check values: its rules and its compiled schema."""

    __slots__ = ("_validator", "media_def", "passes", "wants_json")

    def __init__(self, media_def: MediaDef, urn: MediaUrn) -> None:
        self.media_def = media_def
        self._validator: Any = None
        #: The schema compiled to a quick filter of valid values (None: no schema, or one it
        #: cannot write out); the full validator decides what it does not pass.
        self.passes = compile_schema(media_def.schema) if media_def.schema is not None else None
        # A value is read as JSON when the media says so or a schema describes it; text
        # media with only rules (a pattern, allowed values) are checked as their text.
        self.wants_json = (
            media_def.schema is not None
            or urn.get_tag("fmt") == "json"
            or urn.is_numeric()
            or urn.is_bool()
        )

    def failure(self, value: Any) -> tuple[str, str] | None:
        """The first failure of ``value``: ``(pointer, rule)``, or None."""
        validation = self.media_def.validation
        if validation is not None:
            try:
                rule = validation.violation(value)
            except ValueError as error:
                return "", str(error)
            if rule is not None:
                return "", rule
        schema = self.media_def.schema
        if schema is None or (self.passes is not None and self.passes(value)):
            return None
        if self._validator is None:
            import jsonschema  # only for a schema the quick filter did not settle

            try:
                jsonschema.Draft7Validator.check_schema(schema)
            except jsonschema.SchemaError as refused:
                return "", f"the schema does not compile: {refused.message}"
            self._validator = jsonschema.Draft7Validator(schema)
        for failed in self._validator.iter_errors(value):
            return _pointer(failed.absolute_path), str(failed.validator)
        return None

    def decode(self, value: Any) -> tuple[Any, str | None]:
        """The value to check of one output value or item, or a reason it cannot be read."""
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return None, "the value is not UTF-8 text"
        elif isinstance(value, str):
            text = value
        else:
            return value, None  # a CBOR value: checked as it is
        if not self.wants_json:
            return text, None
        try:
            return json.loads(text), None
        except ValueError:
            return None, "the value is not JSON"


class OutputChecks:
    """The media definitions one cartridge's outputs are held to, by canonical media URN."""

    def __init__(self, *tables: Iterable[MediaDef | Mapping[str, Any]]) -> None:
        self._by_urn: dict[str, _Definition] = {}
        self._lookups: dict[str, _Definition | None] = {}
        from ..machine import MediaDef  # built only for a cartridge or engine with definitions

        for table in tables:  # earlier tables win
            for entry in table:
                media_def = entry if isinstance(entry, MediaDef) else MediaDef.from_json(entry)
                if media_def.validation is None and media_def.schema is None:
                    continue  # nothing to check
                try:
                    urn = MediaUrn.parse(media_def.urn)
                except UrnError:
                    continue  # no output can carry it
                if urn.text not in self._by_urn:
                    self._by_urn[urn.text] = _Definition(media_def, urn)

    def __bool__(self) -> bool:
        return bool(self._by_urn)

    def definition(self, media_urn: str) -> _Definition | None:
        """The definition an output of ``media_urn`` is held to (looked up once per text)."""
        try:
            return self._lookups[media_urn]
        except KeyError:
            pass
        try:
            found = self._by_urn.get(MediaUrn.parse(media_urn).text)
        except UrnError:
            found = None
        self._lookups[media_urn] = found
        return found

    def check(
        self,
        cap: str,
        output: str | None,
        media_urn: str,
        values: Sequence[Any],
        *,
        is_sequence: bool,
    ) -> None:
        """Check one ended output: its one value (scalar) or each item (sequence).

        :raises OutputInvalid: the first failure.
        """
        found = self.definition(media_urn)
        if found is None:
            return
        for index, raw in enumerate(values):
            value, unreadable = found.decode(raw)
            failed = ("", unreadable) if unreadable is not None else found.failure(value)
            if failed is not None:
                item = index if is_sequence else None
                raise OutputInvalid(cap, output, media_urn, failed[0], failed[1], item=item)


def check_outputs(checks: OutputChecks, cap: str, outputs: Mapping[Any, OutputResult]) -> None:
    """Check every output of a collected result.

    :raises OutputInvalid: the first failure.
    """
    for out in outputs.values():
        if checks.definition(out.media_urn) is None:
            continue
        if out.is_sequence:
            values: Sequence[Any] = [item.value for item in out.items]
        else:
            values = scalar_values(list(out.values) if out.values else [out.data])
        checks.check(cap, out.output, out.media_urn, values, is_sequence=out.is_sequence)


class OutputWatch:
    """Follows a streamed response and checks each output that has a definition as it ends:
    the pieces of those outputs only are kept (references, no copies) until then."""

    def __init__(self, checks: OutputChecks, cap: str) -> None:
        self._checks = checks
        self._cap = cap
        #: stream id -> (output name, media URN, sequence?, pieces) of checked streams.
        self._open: dict[str, tuple[str | None, str, bool, list[Any]]] = {}

    def see(self, ev: CallEvent) -> None:
        """Take one event in.

        :raises OutputInvalid: ``ev`` ends an output that breaks its definition.
        """
        kind = type(ev)
        if kind is OutputData or kind is OutputItem:
            watched = self._open.get(ev.stream_id)  # type: ignore[union-attr]
            if watched is not None:
                watched[3].append(ev.value)  # type: ignore[union-attr]
        elif kind is OutputStarted:
            assert isinstance(ev, OutputStarted)
            if self._checks.definition(ev.media_urn) is not None:
                self._open[ev.stream_id] = (ev.output, ev.media_urn, ev.is_sequence, [])
        elif kind is OutputEnded:
            assert isinstance(ev, OutputEnded)
            watched = self._open.pop(ev.stream_id, None)
            if watched is not None:
                output, media_urn, is_sequence, pieces = watched
                values = pieces if is_sequence else scalar_values(pieces)
                self._checks.check(self._cap, output, media_urn, values, is_sequence=is_sequence)


def scalar_values(pieces: list[Any]) -> list[Any]:
    """The values to check of a scalar output from what it carried: its bytes and text joined
    into one value, or each CBOR value on its own."""
    if all(isinstance(p, bytes | bytearray | memoryview | str) for p in pieces):
        if len(pieces) == 1:
            return pieces
        return [b"".join(p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in pieces)]
    return pieces
