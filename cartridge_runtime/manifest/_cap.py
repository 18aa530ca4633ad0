"""Cap definitions, cap groups and the mandatory identity cap (MAN-3, MAN-8).

A :class:`CapDef` keeps its URN as canonical text (the reference writes
``urn.to_string()``), so a cap built from ``"cap:op=x;in=media:"`` serializes
exactly as the reference would serialize it. Media URNs inside args and
outputs are kept verbatim, as the reference keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from ..urn import ADAPTER_SELECTION_CAP, DISCARD_CAP, IDENTITY_CAP, MEDIA_VOID
from ._args import ArgDef, OutputDef
from ._parse import (
    as_list,
    as_object,
    canonical_cap_urn,
    fail,
    join,
    opt_bool,
    opt_text,
    parse_cap_urn,
    req_text,
)

if TYPE_CHECKING:
    from cartridge_runtime.urn import CapUrn

__all__ = (
    "DimRef",
    "RegisteredBy",
    "CapDef",
    "CapGroup",
    "identity_cap",
    "CAP_IDENTITY",
    "CAP_DISCARD",
    "CAP_ADAPTER_SELECTION",
    "IDENTITY_DESCRIPTION",
    "PLANNABLE_KEY",
)

#: The identity cap's URN. Every manifest must declare a cap with exactly this text.
CAP_IDENTITY: Final = IDENTITY_CAP
#: The discard cap the reference runtime registers a handler for automatically.
CAP_DISCARD: Final = DISCARD_CAP
#: The adapter-selection cap the reference runtime registers automatically.
CAP_ADAPTER_SELECTION: Final = ADAPTER_SELECTION_CAP
#: The cap metadata key a manifest sets to ``"false"`` for a cap that a planner should not
#: offer (a test or diagnostic cap): it is served and called as any other, only never planned.
PLANNABLE_KEY: Final = "plannable"
#: The metadata words that switch a flag off.
_FALSE_WORDS: Final = frozenset(("false", "no", "0"))
#: The identity cap's one-line description, as the reference writes it.
IDENTITY_DESCRIPTION: Final = (
    "The categorical identity morphism. Echoes input as output unchanged. "
    "Mandatory in every capability set."
)


def _aliases(value: str | Iterable[str]) -> tuple[str, ...]:
    """A single string is one alias, never a sequence of one-letter aliases."""
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _str_dict(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value) if value else {}


@attrs.frozen(kw_only=True)
class DimRef:
    """One dim a definition was built from and the value chosen from it
    (descriptive only; matching never reads it)."""

    dim: str
    value: str

    def to_json(self) -> dict[str, Any]:
        """``{"dim": ..., "value": ...}``."""
        return {"dim": self.dim, "value": self.value}


@attrs.frozen(kw_only=True)
class RegisteredBy:
    """Who registered a cap in a registry, and when (``registered_at`` text)."""

    username: str
    registered_at: str

    def to_json(self) -> dict[str, Any]:
        """``{"username": ..., "registered_at": ...}``."""
        return {"username": self.username, "registered_at": self.registered_at}


@attrs.frozen(kw_only=True)
class CapDef:
    """One cap of a manifest: its URN, its CLI names (``aliases``), and the
    arguments and outputs it declares.

    Constructing one canonicalizes ``urn`` and therefore raises
    :class:`ManifestUrnError` when it does not parse as a cap URN.
    """

    urn: str = attrs.field(converter=canonical_cap_urn)
    title: str
    aliases: tuple[str, ...] = attrs.field(converter=_aliases)
    cap_description: str | None = None
    documentation: str | None = None
    args: tuple[ArgDef, ...] = attrs.field(default=(), converter=_tuple)
    outputs: tuple[OutputDef, ...] = attrs.field(default=(), converter=_tuple)
    #: Text-to-text metadata; written only when non-empty.
    metadata: dict[str, str] = attrs.field(factory=dict, converter=_str_dict, hash=False)
    #: A generic-input umbrella that no cartridge backs; written only when true.
    abstract: bool = False
    #: Definition version; written only when non-zero.
    version: int = 0
    dims: tuple[DimRef, ...] = attrs.field(default=(), converter=_tuple)
    metadata_json: Any = attrs.field(default=None, hash=False)
    registered_by: RegisteredBy | None = None
    supported_model_types: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    default_model_spec: str | None = None

    FIELDS_IN_ORDER: ClassVar[tuple[str, ...]] = (
        "urn",
        "title",
        "aliases",
        "abstract",
        "version",
        "cap_description",
        "documentation",
        "dims",
        "args",
        "outputs",
        "metadata",
        "metadata_json",
        "registered_by",
        "supported_model_types",
        "default_model_spec",
    )

    # -- convenience -------------------------------------------------------------

    @classmethod
    def simple(
        cls,
        urn: str,
        title: str,
        *,
        aliases: str | Iterable[str],
        description: str | None = None,
        input_name: str = "input",
        input_description: str | None = None,
        input_is_sequence: bool = False,
        input_streaming: bool = False,
        output_name: str = "output",
        output_description: str = "output",
        output_is_sequence: bool = False,
        output_streaming: bool = False,
        extra_args: Sequence[ArgDef] = (),
        extra_outputs: Sequence[OutputDef] = (),
        documentation: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> CapDef:
        """A cap whose main input and main output follow from its URN.

        The main input is a stdin argument typed by ``in=`` (left out when
        ``in=`` is ``media:void``), the main output is typed by ``out=`` (left
        out when ``out=`` is void); ``extra_args`` and ``extra_outputs`` come
        after them. The result satisfies RULE15 and RULE21 by construction.
        """
        cap_urn = parse_cap_urn(urn, field="urn", cap_urn=urn)
        in_text = str(_spec(cap_urn, "in_spec"))
        out_text = str(_spec(cap_urn, "out_spec"))
        args: list[ArgDef] = []
        if in_text != MEDIA_VOID:
            args.append(
                ArgDef.stdin(
                    in_text,
                    name=input_name,
                    description=input_description,
                    is_sequence=input_is_sequence,
                    streaming=input_streaming,
                )
            )
        args.extend(extra_args)
        outputs: list[OutputDef] = []
        if out_text != MEDIA_VOID:
            outputs.append(
                OutputDef(
                    media_urn=out_text,
                    name=output_name,
                    output_description=output_description,
                    is_sequence=output_is_sequence,
                    streaming=output_streaming,
                )
            )
        outputs.extend(extra_outputs)
        return cls(
            urn=str(cap_urn),
            title=title,
            aliases=aliases,
            cap_description=description,
            documentation=documentation,
            args=args,
            outputs=outputs,
            metadata=metadata,
        )

    # -- queries ------------------------------------------------------------------

    @property
    def cap_urn(self) -> CapUrn:
        """The parsed cap URN."""
        return parse_cap_urn(self.urn, field="urn", cap_urn=self.urn)

    def arg_named(self, name: str) -> ArgDef | None:
        """The argument labelled ``name``, or ``None``."""
        return next((arg for arg in self.args if arg.name == name), None)

    def output_named(self, name: str) -> OutputDef | None:
        """The output labelled ``name``, or ``None``."""
        return next((out for out in self.outputs if out.name == name), None)

    def main_input(self) -> ArgDef | None:
        """The argument whose stdin source is equivalent to ``in=``, or ``None``."""
        from cartridge_runtime.urn import MediaUrn, UrnError

        in_spec = _spec(self.cap_urn, "in_spec")
        for arg in self.args:
            source = arg.stdin_source
            if source is None:
                continue
            try:
                if MediaUrn.parse(source.media_urn).is_equivalent(in_spec):
                    return arg
            except UrnError:
                continue
        return None

    @property
    def plannable(self) -> bool:
        """Whether a planner may offer this cap: its metadata does not set
        :data:`PLANNABLE_KEY` to ``"false"`` (the project's extension, PLAN-24)."""
        word = self.metadata.get(PLANNABLE_KEY)
        return word is None or str(word).strip().lower() not in _FALSE_WORDS

    def main_output(self) -> OutputDef | None:
        """The output equivalent to ``out=``, or ``None`` (always for out= void)."""
        from cartridge_runtime.urn import MediaUrn, UrnError

        out_spec = _spec(self.cap_urn, "out_spec")
        for output in self.outputs:
            try:
                if MediaUrn.parse(output.media_urn).is_equivalent(out_spec):
                    return output
            except UrnError:
                continue
        return None

    # -- JSON ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON object, keys in its order, optional keys left
        out exactly when the reference leaves them out."""
        result: dict[str, Any] = {
            "urn": self.urn,
            "title": self.title,
            "aliases": list(self.aliases),
        }
        if self.abstract:
            result["abstract"] = True
        if self.version != 0:
            result["version"] = self.version
        if self.cap_description is not None:
            result["cap_description"] = self.cap_description
        if self.documentation is not None:
            result["documentation"] = self.documentation
        if self.dims:
            result["dims"] = [dim.to_json() for dim in self.dims]
        if self.args:
            result["args"] = [arg.to_json() for arg in self.args]
        if self.outputs:
            result["outputs"] = [output.to_json() for output in self.outputs]
        if self.metadata:
            result["metadata"] = dict(self.metadata)
        if self.metadata_json is not None:
            result["metadata_json"] = self.metadata_json
        if self.registered_by is not None:
            result["registered_by"] = self.registered_by.to_json()
        if self.supported_model_types:
            result["supported_model_types"] = list(self.supported_model_types)
        if self.default_model_spec is not None:
            result["default_model_spec"] = self.default_model_spec
        return result

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> CapDef:
        """Read a cap object. Unknown cap-level keys are ignored (as the
        reference ignores them); args and outputs are read strictly.

        :raises ManifestParseError: a missing/mistyped field or empty aliases.
        :raises ManifestUrnError: the cap URN does not parse.
        """
        obj = as_object(data, path)
        raw_urn = req_text(obj, "urn", path)
        urn = str(parse_cap_urn(raw_urn, field=join(path, "urn"), cap_urn=raw_urn))
        aliases_raw = obj.get("aliases")
        if not aliases_raw:
            fail(
                "a cap must declare at least one alias ('aliases' is required and non-empty)",
                "aliases",
                cap_urn=urn,
            )
        aliases = as_list(aliases_raw, "aliases", cap_urn=urn)
        for index, alias in enumerate(aliases):
            if not isinstance(alias, str):
                fail("an alias is a string", join("aliases", index), cap_urn=urn)
        args: list[ArgDef] = []
        if "args" in obj and obj["args"] is not None:
            raw_args = as_list(obj["args"], "args", cap_urn=urn)
            args = [
                ArgDef.from_json(item, join("args", index), cap_urn=urn)
                for index, item in enumerate(raw_args)
            ]
        outputs: list[OutputDef] = []
        if obj.get("outputs"):
            raw_outputs = as_list(obj["outputs"], "outputs", cap_urn=urn)
            outputs = [
                OutputDef.from_json(item, join("outputs", index), cap_urn=urn)
                for index, item in enumerate(raw_outputs)
            ]
        metadata = obj.get("metadata")
        if metadata is not None:
            metadata = as_object(metadata, "metadata", cap_urn=urn)
        version = obj.get("version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            fail(f"a cap version is an integer, not {version!r}", "version", cap_urn=urn)
        model_types = obj.get("supported_model_types") or []
        model_types = as_list(model_types, "supported_model_types", cap_urn=urn)
        if not all(isinstance(item, str) for item in model_types):
            fail("model types are strings", "supported_model_types", cap_urn=urn)
        return cls(
            urn=urn,
            title=req_text(obj, "title", "", cap_urn=urn),
            aliases=aliases,
            cap_description=opt_text(obj, "cap_description", "", cap_urn=urn),
            documentation=opt_text(obj, "documentation", "", cap_urn=urn),
            args=args,
            outputs=outputs,
            metadata=metadata,
            abstract=opt_bool(obj, "abstract", "", cap_urn=urn),
            version=version,
            dims=_dims_from_json(obj.get("dims"), urn),
            metadata_json=obj.get("metadata_json"),
            registered_by=_registered_by_from_json(obj.get("registered_by"), urn),
            supported_model_types=model_types,
            default_model_spec=opt_text(obj, "default_model_spec", "", cap_urn=urn),
        )


def _spec(cap_urn: CapUrn, name: str) -> Any:
    """``cap_urn.in_spec`` / ``out_spec`` whether the URN layer exposes them
    as attributes or as methods."""
    value = getattr(cap_urn, name)
    return value() if callable(value) else value


def _dims_from_json(value: Any, urn: str) -> tuple[DimRef, ...]:
    if value is None:
        return ()
    items = as_list(value, "dims", cap_urn=urn)
    dims: list[DimRef] = []
    for index, item in enumerate(items):
        path = join("dims", index)
        obj = as_object(item, path, cap_urn=urn)
        unknown = sorted(set(obj) - {"dim", "value"})
        if unknown:
            fail(f"a dims entry has unknown field(s) {', '.join(unknown)}", path, cap_urn=urn)
        ref = DimRef(
            dim=req_text(obj, "dim", path, cap_urn=urn),
            value=req_text(obj, "value", path, cap_urn=urn),
        )
        if any(seen.dim == ref.dim for seen in dims):
            fail(f"dim {ref.dim!r} is named more than once", path, cap_urn=urn)
        dims.append(ref)
    return tuple(dims)


def _registered_by_from_json(value: Any, urn: str) -> RegisteredBy | None:
    if value is None:
        return None
    obj = as_object(value, "registered_by", cap_urn=urn)
    return RegisteredBy(
        username=req_text(obj, "username", "registered_by", cap_urn=urn),
        registered_at=req_text(obj, "registered_at", "registered_by", cap_urn=urn),
    )


def identity_cap() -> CapDef:
    """The mandatory identity cap, exactly as the reference declares it:
    ``cap:effect=none``, title ``Identity``, alias ``identity``, one stdin
    argument ``input`` of ``media:`` and one output ``output`` of ``media:``."""
    return CapDef(
        urn=CAP_IDENTITY,
        title="Identity",
        aliases=("identity",),
        cap_description=IDENTITY_DESCRIPTION,
        args=(ArgDef.stdin("media:", name="input"),),
        outputs=(
            OutputDef(
                media_urn="media:",
                name="output",
                output_description="The input data, unchanged",
            ),
        ),
    )


@attrs.frozen(kw_only=True)
class CapGroup:
    """Caps and adapter media URNs registered as one atomic unit."""

    name: str
    caps: tuple[CapDef, ...] = attrs.field(converter=_tuple)
    #: Media URNs this group's adapter handles; written only when non-empty.
    adapter_urns: tuple[str, ...] = attrs.field(default=(), converter=_tuple)

    def to_json(self) -> dict[str, Any]:
        """``{"name", "caps", ["adapter_urns"]}``."""
        result: dict[str, Any] = {
            "name": self.name,
            "caps": [cap.to_json() for cap in self.caps],
        }
        if self.adapter_urns:
            result["adapter_urns"] = list(self.adapter_urns)
        return result

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> CapGroup:
        """Read a cap group object.

        :raises ManifestError: a shape problem in the group or in one of its caps.
        """
        obj = as_object(data, path)
        caps_raw = as_list(obj.get("caps", []), join(path, "caps"))
        adapters = as_list(obj.get("adapter_urns") or [], join(path, "adapter_urns"))
        for index, item in enumerate(adapters):
            if not isinstance(item, str):
                fail("an adapter URN is a string", join(join(path, "adapter_urns"), index))
        return cls(
            name=req_text(obj, "name", path),
            caps=[
                CapDef.from_json(item, join(join(path, "caps"), index))
                for index, item in enumerate(caps_raw)
            ],
            adapter_urns=adapters,
        )
