"""Arguments, their sources, and outputs of a cap definition (MAN-4, MAN-5).

The JSON shape is the reference's, key for key and in its order: an argument
writes ``media_urn, name, [accepts], required, sources, [arg_description],
[default_value], [metadata], is_sequence, streaming``; an output writes
``media_urn, name, output_description, optional, [carries], [metadata],
is_sequence, streaming``. Unknown keys in either are refused on input (an
unknown key is a contract this build cannot honour).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

import attrs

from ._parse import (
    as_list,
    as_object,
    fail,
    join,
    opt_bool,
    opt_text,
    req_bool,
    req_text,
)

__all__ = (
    "StdinSource",
    "PositionSource",
    "CliFlagSource",
    "ArgSource",
    "ArgDef",
    "OutputDef",
    "OUTPUT_CARRIES_INPUT",
    "source_from_json",
)

#: The only value ``carries`` may take: the output carries the main input's type.
OUTPUT_CARRIES_INPUT: Final = "input"


@attrs.frozen(kw_only=True)
class StdinSource:
    """The argument is the value piped in on stdin, typed ``media_urn``.
    The arg declaring it is the cap's main input (RULE3, RULE15)."""

    media_urn: str

    #: Source type name, as the JSON key and the rules (RULE4) name it.
    kind: ClassVar[str] = "stdin"

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON form ``{"stdin": media_urn}``."""
        return {"stdin": self.media_urn}


@attrs.frozen(kw_only=True)
class PositionSource:
    """The argument is the ``index``-th positional CLI argument (0-based)."""

    index: int

    kind: ClassVar[str] = "position"

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON form ``{"position": index}``."""
        return {"position": self.index}


@attrs.frozen(kw_only=True)
class CliFlagSource:
    """The argument is given by a CLI flag such as ``--lang``."""

    flag: str

    kind: ClassVar[str] = "cli_flag"

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON form ``{"cli_flag": flag}``."""
        return {"cli_flag": self.flag}


ArgSource = StdinSource | PositionSource | CliFlagSource


def source_from_json(data: Any, path: str, *, cap_urn: str | None = None) -> ArgSource:
    """Read one source object. Like the reference, it is read by its first
    known key (``stdin``, then ``position``, then ``cli_flag``); other keys
    are ignored, and an object with none of them is refused."""
    obj = as_object(data, path, cap_urn=cap_urn)
    if "stdin" in obj:
        return StdinSource(media_urn=req_text(obj, "stdin", path, cap_urn=cap_urn))
    if "position" in obj:
        value = obj["position"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            fail(
                f"a position is a non-negative integer, not {value!r}",
                join(path, "position"),
                cap_urn=cap_urn,
            )
        return PositionSource(index=value)
    if "cli_flag" in obj:
        return CliFlagSource(flag=req_text(obj, "cli_flag", path, cap_urn=cap_urn))
    fail(
        "a source has one of the keys 'stdin', 'position' or 'cli_flag'",
        path,
        cap_urn=cap_urn,
    )


def _sources(value: Iterable[ArgSource]) -> tuple[ArgSource, ...]:
    return tuple(value)


def _check_unknown(
    obj: Mapping[str, Any], known: frozenset[str], what: str, path: str, cap_urn: str | None
) -> None:
    unknown = sorted(key for key in obj if key not in known)
    if unknown:
        fail(
            f"{what} has unknown field(s) {', '.join(unknown)}; "
            f"the known fields are {', '.join(sorted(known))}",
            join(path, unknown[0]),
            cap_urn=cap_urn,
        )


def _require_name(obj: Mapping[str, Any], what: str, path: str, cap_urn: str | None) -> str:
    value = obj.get("name")
    if not isinstance(value, str):
        fail(f"{what} is missing field 'name'", join(path, "name"), cap_urn=cap_urn)
    return value


@attrs.frozen(kw_only=True)
class ArgDef:
    """One argument of a cap.

    ``media_urn`` identifies the argument (and is the stream URN unless it
    has a stdin source); ``name`` is the label a machine selects it by;
    ``accepts`` is the type a bound value must conform to when that is not
    ``media_urn`` (never together with a stdin source, RULE18).
    """

    media_urn: str
    name: str
    sources: tuple[ArgSource, ...] = attrs.field(converter=_sources)
    required: bool = True
    accepts: str | None = None
    arg_description: str | None = None
    #: Any JSON value; ``None`` means "no default" (as in the reference).
    default_value: Any = attrs.field(default=None, hash=False)
    #: Any JSON value; ``None`` means absent.
    metadata: Any = attrs.field(default=None, hash=False)
    is_sequence: bool = False
    streaming: bool = False

    KNOWN_KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "media_urn",
            "name",
            "accepts",
            "required",
            "sources",
            "arg_description",
            "default_value",
            "metadata",
            "is_sequence",
            "streaming",
        }
    )

    # -- convenience constructors -------------------------------------------------

    @classmethod
    def stdin(
        cls,
        media_urn: str,
        *,
        name: str = "input",
        description: str | None = None,
        required: bool = True,
        is_sequence: bool = False,
        streaming: bool = False,
        metadata: Any = None,
    ) -> ArgDef:
        """The main input: an argument delivered on stdin, typed ``media_urn``."""
        return cls(
            media_urn=media_urn,
            name=name,
            sources=(StdinSource(media_urn=media_urn),),
            required=required,
            arg_description=description,
            is_sequence=is_sequence,
            streaming=streaming,
            metadata=metadata,
        )

    @classmethod
    def positional(
        cls,
        media_urn: str,
        index: int,
        *,
        name: str,
        description: str | None = None,
        required: bool = True,
        default_value: Any = None,
        accepts: str | None = None,
        is_sequence: bool = False,
    ) -> ArgDef:
        """A side argument given as the ``index``-th positional CLI argument."""
        return cls(
            media_urn=media_urn,
            name=name,
            sources=(PositionSource(index=index),),
            required=required,
            accepts=accepts,
            arg_description=description,
            default_value=default_value,
            is_sequence=is_sequence,
        )

    @classmethod
    def flag(
        cls,
        media_urn: str,
        flag: str,
        *,
        name: str,
        description: str | None = None,
        required: bool = False,
        default_value: Any = None,
        accepts: str | None = None,
        is_sequence: bool = False,
    ) -> ArgDef:
        """A side argument given by a CLI flag (optional unless said otherwise)."""
        return cls(
            media_urn=media_urn,
            name=name,
            sources=(CliFlagSource(flag=flag),),
            required=required,
            accepts=accepts,
            arg_description=description,
            default_value=default_value,
            is_sequence=is_sequence,
        )

    # -- queries ------------------------------------------------------------------

    @property
    def stdin_source(self) -> StdinSource | None:
        """The first stdin source, or ``None``."""
        for source in self.sources:
            if isinstance(source, StdinSource):
                return source
        return None

    @property
    def has_stdin_source(self) -> bool:
        """Whether this arg declares a stdin source (it is then the main input)."""
        return self.stdin_source is not None

    @property
    def stream_urn(self) -> str:
        """The media URN the input stream is delivered under: the stdin
        source's URN when there is one, else ``media_urn``."""
        source = self.stdin_source
        return source.media_urn if source is not None else self.media_urn

    @property
    def default_bytes(self) -> bytes | None:
        """The ``default_value`` as the bytes a caller would have typed (``None``: no
        default): text as its UTF-8, ``true``/``false``, a number, list or map as its JSON text.

        The one wire form of a default, whoever fills it in (CLI mode, the engine, a machine
        step, the test harness), so a handler sees the same bytes in every mode.
        """
        value = self.default_value
        if value is None:
            return None
        if isinstance(value, str):
            return value.encode("utf-8")
        return json.dumps(value).encode("utf-8")

    @property
    def accepted_urn(self) -> str:
        """The media URN a value bound to this arg must conform to: the stdin
        URN, else ``accepts``, else ``media_urn``."""
        source = self.stdin_source
        if source is not None:
            return source.media_urn
        return self.accepts if self.accepts is not None else self.media_urn

    # -- JSON ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON object, keys in its order."""
        result: dict[str, Any] = {"media_urn": self.media_urn, "name": self.name}
        if self.accepts is not None:
            result["accepts"] = self.accepts
        result["required"] = self.required
        result["sources"] = [source.to_json() for source in self.sources]
        if self.arg_description is not None:
            result["arg_description"] = self.arg_description
        if self.default_value is not None:
            result["default_value"] = self.default_value
        if self.metadata is not None:
            result["metadata"] = self.metadata
        result["is_sequence"] = self.is_sequence
        result["streaming"] = self.streaming
        return result

    @classmethod
    def from_json(cls, data: Any, path: str = "", *, cap_urn: str | None = None) -> ArgDef:
        """Read an argument object, refusing unknown keys and a missing name.

        :raises ManifestParseError: on any shape problem, naming the path.
        """
        obj = as_object(data, path, cap_urn=cap_urn)
        _check_unknown(obj, cls.KNOWN_KEYS, "argument", path, cap_urn)
        name = _require_name(obj, "argument", path, cap_urn)
        if "sources" not in obj:
            fail("missing required field 'sources'", join(path, "sources"), cap_urn=cap_urn)
        raw_sources = as_list(obj["sources"], join(path, "sources"), cap_urn=cap_urn)
        sources = tuple(
            source_from_json(item, join(join(path, "sources"), index), cap_urn=cap_urn)
            for index, item in enumerate(raw_sources)
        )
        return cls(
            media_urn=req_text(obj, "media_urn", path, cap_urn=cap_urn),
            name=name,
            required=req_bool(obj, "required", path, cap_urn=cap_urn),
            sources=sources,
            accepts=opt_text(obj, "accepts", path, cap_urn=cap_urn),
            arg_description=opt_text(obj, "arg_description", path, cap_urn=cap_urn),
            default_value=obj.get("default_value"),
            metadata=obj.get("metadata"),
            is_sequence=opt_bool(obj, "is_sequence", path, cap_urn=cap_urn),
            streaming=opt_bool(obj, "streaming", path, cap_urn=cap_urn),
        )


@attrs.frozen(kw_only=True)
class OutputDef:
    """One output of a cap. Exactly one output is the main one, equivalent
    to the cap URN's ``out=`` (none when ``out=`` is ``media:void``, RULE21)."""

    media_urn: str
    name: str
    output_description: str
    #: The cap may end without producing this output.
    optional: bool = False
    #: ``"input"`` when the output carries the main input's type; else ``None``.
    carries: str | None = None
    metadata: Any = attrs.field(default=None, hash=False)
    is_sequence: bool = False
    #: The output may be emitted without a length promise (unbounded).
    streaming: bool = False

    KNOWN_KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "media_urn",
            "name",
            "output_description",
            "optional",
            "carries",
            "metadata",
            "is_sequence",
            "streaming",
        }
    )

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON object, keys in its order."""
        result: dict[str, Any] = {
            "media_urn": self.media_urn,
            "name": self.name,
            "output_description": self.output_description,
            "optional": self.optional,
        }
        if self.carries is not None:
            result["carries"] = self.carries
        if self.metadata is not None:
            result["metadata"] = self.metadata
        result["is_sequence"] = self.is_sequence
        result["streaming"] = self.streaming
        return result

    @classmethod
    def from_json(cls, data: Any, path: str = "", *, cap_urn: str | None = None) -> OutputDef:
        """Read an output object, refusing unknown keys, a missing name and a
        ``carries`` other than ``"input"``.

        :raises ManifestParseError: on any shape problem, naming the path.
        """
        obj = as_object(data, path, cap_urn=cap_urn)
        _check_unknown(obj, cls.KNOWN_KEYS, "output", path, cap_urn)
        name = _require_name(obj, "output", path, cap_urn)
        carries = obj.get("carries")
        if carries is not None and carries != OUTPUT_CARRIES_INPUT:
            fail(
                f"an output carries its own type or {OUTPUT_CARRIES_INPUT!r}, not {carries!r}",
                join(path, "carries"),
                cap_urn=cap_urn,
            )
        return cls(
            media_urn=req_text(obj, "media_urn", path, cap_urn=cap_urn),
            name=name,
            output_description=req_text(obj, "output_description", path, cap_urn=cap_urn),
            optional=opt_bool(obj, "optional", path, cap_urn=cap_urn),
            carries=carries,
            metadata=obj.get("metadata"),
            is_sequence=opt_bool(obj, "is_sequence", path, cap_urn=cap_urn),
            streaming=opt_bool(obj, "streaming", path, cap_urn=cap_urn),
        )
