"""The whole cartridge manifest (MAN-1 to MAN-3): model, JSON in and out.

Serialization theory: the reference builds a plain dict whose keys are
inserted in a fixed order and hands it to ``json.dumps`` with default
settings (``", "`` / ``": "`` separators, ``ensure_ascii``). HELLO carries
those UTF-8 bytes; the CLI prints the same object with ``indent=2``. Our
``to_json()`` methods build the same dicts in the same order, so the same
``json.dumps`` call reproduces the bytes exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs

from ._cap import CAP_IDENTITY, CapDef, CapGroup, identity_cap
from ._errors import ManifestParseError, MissingIdentityCapError
from ._parse import as_list, as_object, fail, join, opt_text, parse_media_urn, req_text
from ._pool_declarations import PoolDeclarations
from ._validate import validate_cap, validate_pool_declarations

__all__ = (
    "Manifest",
    "CHANNELS",
    "validate_manifest",
)

#: The distribution channels a manifest may name.
CHANNELS: Final = ("release", "nightly")


def _groups(value: Iterable[CapGroup]) -> tuple[CapGroup, ...]:
    return tuple(value)


def _media_defs(value: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(value)


def _read_media_defs(value: Any) -> tuple[Mapping[str, Any], ...]:
    """The ``media_defs`` list: objects in the registry's form, each naming its ``urn``."""
    out = []
    for index, item in enumerate(as_list(value, "media_defs")):
        path = join("media_defs", index)
        entry = as_object(item, path)
        req_text(entry, "urn", path)
        out.append(dict(entry))
    return tuple(out)


def _channel(value: str) -> str:
    if value not in CHANNELS:
        raise ManifestParseError(
            f"channel must be 'release' or 'nightly', not {value!r}", field="channel"
        )
    return value


@attrs.frozen(kw_only=True)
class Manifest:
    """A cartridge's manifest: identity ``(name, version, channel)``, where it
    was built for (``registry_url``, ``None`` for a dev build), its cap groups
    and optional pool declarations.

    Build one with :meth:`build` (adds the identity cap, one default group),
    or read one with :meth:`from_json`.
    """

    name: str
    version: str
    channel: str = attrs.field(default="release", converter=_channel)
    registry_url: str | None = None
    description: str
    cap_groups: tuple[CapGroup, ...] = attrs.field(converter=_groups)
    author: str | None = None
    page_url: str | None = None
    pool_declarations: PoolDeclarations = attrs.field(factory=PoolDeclarations)
    #: Media definitions the cartridge ships, in the registry's form (``urn``, ``media_type``,
    #: ``title``, ``validation``, ``schema``...): an engine holds the outputs of this
    #: cartridge's calls to their rules and JSON Schema. Written only when there are some,
    #: which the reference reads past (an unknown key).
    media_defs: tuple[Mapping[str, Any], ...] = attrs.field(
        default=(), converter=_media_defs, hash=False
    )

    DEFAULT_GROUP: ClassVar[str] = "default"

    # -- building -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        name: str,
        version: str,
        description: str,
        caps: Sequence[CapDef] = (),
        channel: str = "release",
        registry_url: str | None = None,
        author: str | None = None,
        page_url: str | None = None,
        pools: Mapping[str, Iterable[str]] | None = None,
        capacities: Mapping[str, int] | None = None,
        adapter_urns: Iterable[str] = (),
        group_name: str = "default",
        media_defs: Iterable[Mapping[str, Any]] = (),
    ) -> Manifest:
        """A manifest with one cap group holding ``caps``, the identity cap
        first when ``caps`` does not already declare ``cap:effect=none``.

        ``pools`` and ``capacities`` become the pool declarations; cap URNs
        in them may be written in any spelling (validation canonicalizes).
        ``media_defs`` are media definitions in the registry's form (see
        :attr:`media_defs`).
        """
        cap_list = list(caps)
        if not any(cap.urn == CAP_IDENTITY for cap in cap_list):
            cap_list.insert(0, identity_cap())
        return cls(
            name=name,
            version=version,
            channel=channel,
            registry_url=registry_url,
            description=description,
            cap_groups=(
                CapGroup(name=group_name, caps=cap_list, adapter_urns=tuple(adapter_urns)),
            ),
            author=author,
            page_url=page_url,
            pool_declarations=PoolDeclarations(pools=pools, capacities=capacities),
            media_defs=_read_media_defs(list(media_defs)),
        )

    # -- queries ------------------------------------------------------------------

    def all_caps(self) -> list[CapDef]:
        """Every cap of every group, in declaration order."""
        return [cap for group in self.cap_groups for cap in group.caps]

    def iter_caps(self) -> Iterator[CapDef]:
        """Every cap of every group, lazily."""
        for group in self.cap_groups:
            yield from group.caps

    def find_cap(self, urn_or_alias: str) -> CapDef | None:
        """The cap named by ``urn_or_alias``: first by exact URN text, then by
        alias, then by cap-URN equivalence (any spelling of the same cap).
        ``None`` when nothing matches."""
        caps = self.all_caps()
        for cap in caps:
            if cap.urn == urn_or_alias:
                return cap
        for cap in caps:
            if urn_or_alias in cap.aliases:
                return cap
        from cartridge_runtime.urn import CapUrn, UrnError

        try:
            wanted = CapUrn.parse(urn_or_alias)
        except UrnError:
            return None
        for cap in caps:
            if cap.cap_urn.is_equivalent(wanted):
                return cap
        return None

    # -- JSON ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON object, keys in its order. ``registry_url`` is
        always written (``null`` for dev builds)."""
        result: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "channel": self.channel,
            "registry_url": self.registry_url,
            "description": self.description,
            "cap_groups": [group.to_json() for group in self.cap_groups],
        }
        if self.author is not None:
            result["author"] = self.author
        if self.page_url is not None:
            result["page_url"] = self.page_url
        if not self.pool_declarations.is_empty:
            result["pool_declarations"] = self.pool_declarations.to_json()
        if self.media_defs:
            result["media_defs"] = [dict(entry) for entry in self.media_defs]
        return result

    def to_json_bytes(self) -> bytes:
        """The bytes HELLO carries in ``meta.manifest`` (byte-identical to the reference)."""
        return json.dumps(self.to_json()).encode("utf-8")

    def to_pretty_json(self) -> str:
        """The text the CLI ``manifest`` command prints (2-space indent)."""
        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_dict(cls, data: Any, *, strict: bool = False) -> Manifest:
        """Read a manifest from parsed JSON.

        With ``strict=True`` the result is also validated (identity cap,
        RULE1..RULE22, pool declarations).

        :raises ManifestParseError: the object is not a manifest.
        :raises ManifestUrnError: a cap URN does not parse.
        :raises ManifestError: (strict) any validation failure.
        """
        obj = as_object(data, "")
        if "registry_url" not in obj:
            fail("missing required field 'registry_url' (null for dev builds)", "registry_url")
        channel = req_text(obj, "channel", "")
        if "cap_groups" not in obj:
            fail("missing required field 'cap_groups'", "cap_groups")
        groups_raw = as_list(obj["cap_groups"], "cap_groups")
        if not groups_raw:
            fail("a manifest declares at least one cap group", "cap_groups")
        declarations = PoolDeclarations()
        if obj.get("pool_declarations") is not None:
            declarations = PoolDeclarations.from_json(obj["pool_declarations"])
        manifest = cls(
            name=req_text(obj, "name", ""),
            version=req_text(obj, "version", ""),
            channel=channel,
            registry_url=opt_text(obj, "registry_url", ""),
            description=req_text(obj, "description", ""),
            cap_groups=[
                CapGroup.from_json(item, join("cap_groups", index))
                for index, item in enumerate(groups_raw)
            ],
            author=opt_text(obj, "author", ""),
            page_url=opt_text(obj, "page_url", ""),
            pool_declarations=declarations,
            media_defs=_read_media_defs(obj["media_defs"]) if obj.get("media_defs") else (),
        )
        if strict:
            validate_manifest(manifest)
        return manifest

    @classmethod
    def from_json(
        cls, data: bytes | bytearray | memoryview | str, *, strict: bool = False
    ) -> Manifest:
        """Read a manifest from JSON text or UTF-8 bytes (e.g. HELLO's
        ``meta.manifest``). ``strict=True`` also validates it.

        :raises ManifestParseError: bad UTF-8, bad JSON, or not a manifest.
        :raises ManifestError: (strict) any validation failure.
        """
        try:
            text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
            parsed = json.loads(text)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ManifestParseError(f"manifest is not valid JSON: {exc}") from exc
        return cls.from_dict(parsed, strict=strict)

    def validate(self) -> None:
        """Validate this manifest (see :func:`validate_manifest`).

        :raises ManifestError: the first problem found.
        """
        validate_manifest(self)


def validate_manifest(manifest: Manifest) -> None:
    """Validate a whole manifest: the identity cap, every cap definition,
    every adapter URN, and the pool declarations.

    :raises MissingIdentityCapError: no cap's URN is exactly ``cap:effect=none``.
    :raises ManifestRuleError: a cap breaks a numbered rule.
    :raises ManifestParseError: a cap without aliases.
    :raises ManifestUrnError: a media URN that does not parse.
    :raises PoolDeclarationError: bad pool declarations.
    """
    caps = manifest.all_caps()
    if not any(cap.urn == CAP_IDENTITY for cap in caps):
        raise MissingIdentityCapError(
            f"the manifest has no identity cap ({CAP_IDENTITY}); add identity_cap()",
            field="cap_groups",
        )
    for cap in caps:
        validate_cap(cap)
    for group_index, group in enumerate(manifest.cap_groups):
        for index, adapter in enumerate(group.adapter_urns):
            field = join(join(join("cap_groups", group_index), "adapter_urns"), index)
            parse_media_urn(adapter, field=field)
    if not manifest.pool_declarations.is_empty:
        validate_pool_declarations(manifest.pool_declarations, [cap.urn for cap in caps])
