"""The manifest model: byte-identical JSON, parsing errors, builders, lookups."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from manifest_vectors import cartridge_hellos, hello_files, vector_manifest_bytes

from cartridge_runtime.manifest import (
    CAP_IDENTITY,
    ArgDef,
    CapDef,
    CapGroup,
    CliFlagSource,
    DimRef,
    Manifest,
    ManifestError,
    ManifestParseError,
    ManifestUrnError,
    MissingIdentityCapError,
    OutputDef,
    PositionSource,
    RegisteredBy,
    StdinSource,
    identity_cap,
    validate_manifest,
)


@pytest.mark.parametrize("path", hello_files(), ids=lambda path: path.name)
def test_vector_manifest_round_trips_byte_identically(path: Path) -> None:
    for meta in cartridge_hellos(path):
        raw = meta["manifest"]
        manifest = Manifest.from_json(raw, strict=True)
        assert manifest.to_json_bytes() == raw
        # The dict form is also the JSON form; a second trip changes nothing.
        assert Manifest.from_dict(json.loads(raw)).to_json_bytes() == raw


def test_vector_manifest_content() -> None:
    manifest = Manifest.from_json(vector_manifest_bytes())
    assert manifest.name == "peer-vectors"
    assert manifest.channel == "nightly"
    assert manifest.registry_url is None
    assert len(manifest.all_caps()) == 15
    assert manifest.all_caps()[0] == identity_cap()
    assert manifest.pool_declarations.capacities == {"cap:peer-slow": 1}
    multi = manifest.find_cap("peer-multi")
    assert multi is not None
    assert [output.name for output in multi.outputs] == ["main", "side", "aux", "extra"]
    assert multi.outputs[3].optional is True
    main = multi.main_output()
    assert main is not None and main.name == "main"
    assert multi.main_input() is multi.args[0]


def test_pretty_json_matches_reference_cli_form() -> None:
    capdag_manifest = pytest.importorskip("capdag.bifaci.manifest")
    raw = vector_manifest_bytes()
    ours = Manifest.from_json(raw).to_pretty_json()
    theirs = capdag_manifest.CapManifest.from_json(raw.decode()).to_json()
    assert ours == theirs
    assert json.loads(ours) == json.loads(raw)


def test_identity_cap_is_the_reference_one() -> None:
    cap = identity_cap()
    assert cap.urn == CAP_IDENTITY
    assert cap.title == "Identity"
    assert cap.aliases == ("identity",)
    assert cap.cap_description is not None and cap.cap_description.startswith(
        "The categorical identity morphism."
    )
    assert cap.to_json()["args"] == [
        {
            "media_urn": "media:",
            "name": "input",
            "required": True,
            "sources": [{"stdin": "media:"}],
            "is_sequence": False,
            "streaming": False,
        }
    ]
    standard = pytest.importorskip("capdag.standard.caps")
    assert cap.to_json() == standard.identity_cap().to_dict()


def test_build_adds_identity_first_and_validates() -> None:
    manifest = Manifest.build(
        name="pdf-tools",
        version="1.2.3",
        description="PDF helpers",
        caps=[
            CapDef.simple(
                "cap:op=extract-text;in=media:pdf;out=media:txt",
                "Extract text",
                aliases="extract-text",
                description="Pulls the text out of a PDF",
                extra_args=[
                    ArgDef.flag("media:lang;textable", "--lang", name="lang", default_value="en"),
                    ArgDef.positional("media:pages;textable", 0, name="pages"),
                ],
            ),
            CapDef.simple("cap:in=media:void;op=ping;out=media:void", "Ping", aliases=["ping"]),
        ],
        capacities={"cap:op=extract-text;in=media:pdf;out=media:txt": 2},
    )
    validate_manifest(manifest)
    caps = manifest.all_caps()
    assert caps[0].urn == CAP_IDENTITY
    assert caps[1].urn == "cap:in=media:pdf;op=extract-text;out=media:txt"  # canonical
    assert caps[2].args == () and caps[2].outputs == ()
    assert manifest.channel == "release" and manifest.registry_url is None
    data = json.loads(manifest.to_json_bytes())
    assert list(data) == [
        "name",
        "version",
        "channel",
        "registry_url",
        "description",
        "cap_groups",
        "pool_declarations",
    ]
    # Round trip through JSON is lossless.
    assert Manifest.from_json(manifest.to_json_bytes(), strict=True) == manifest
    # The reference accepts what the builder made, and writes the same bytes.
    capdag_manifest = pytest.importorskip("capdag.bifaci.manifest")
    theirs = capdag_manifest.CapManifest.from_advertised(manifest.to_json_bytes())
    theirs.validate()
    assert json.dumps(theirs.to_dict()).encode() == manifest.to_json_bytes()


def test_build_keeps_a_given_identity_cap() -> None:
    manifest = Manifest.build(name="x", version="1", description="d", caps=[identity_cap()])
    assert len(manifest.all_caps()) == 1


def test_builder_output_matches_reference_serialization() -> None:
    definition = pytest.importorskip("capdag.cap.definition")
    cap = CapDef(
        urn="cap:op=translate;in=media:txt;out=media:txt",
        title="Translate",
        aliases=["translate", "tr"],
        cap_description="Translates",
        documentation="Long text — with ünïcode",
        version=3,
        abstract=True,
        dims=[DimRef(dim="lang", value="fr")],
        args=[
            ArgDef(
                media_urn="media:txt",
                name="input",
                sources=[StdinSource(media_urn="media:txt"), PositionSource(index=0)],
                arg_description="text",
                metadata={"k": [1, 2]},
            ),
            ArgDef(
                media_urn="media:lang;textable",
                name="target",
                accepts="media:textable",
                required=False,
                sources=[CliFlagSource(flag="--to")],
                default_value={"x": None},
            ),
        ],
        outputs=[
            OutputDef(media_urn="media:txt", name="output", output_description="translated"),
            OutputDef(
                media_urn="media:orig",
                name="orig",
                output_description="echo",
                carries="input",
                optional=True,
                metadata={"m": 1},
            ),
        ],
        metadata={"a": "b"},
        metadata_json={"nested": [True]},
        registered_by=RegisteredBy(username="u", registered_at="2026-01-01"),
        supported_model_types=["llm"],
        default_model_spec="hf:x",
    )
    ours = cap.to_json()
    theirs = definition.Cap.from_dict(ours).to_dict()
    assert json.dumps(ours) == json.dumps(theirs)
    assert CapDef.from_json(ours) == cap


def test_optional_manifest_fields_order() -> None:
    manifest = attrs.evolve(
        Manifest.build(
            name="n",
            version="v",
            description="d",
            pools={"gpu": [CAP_IDENTITY]},
            capacities={"gpu": 1},
            adapter_urns=["media:pdf"],
        ),
        author="me",
        page_url="https://example.org/ü",
    )
    raw = manifest.to_json_bytes()
    assert raw.isascii()
    data = json.loads(raw)
    assert list(data)[-3:] == ["author", "page_url", "pool_declarations"]
    assert data["pool_declarations"] == {"pools": {"gpu": [CAP_IDENTITY]}, "capacities": {"gpu": 1}}
    assert data["cap_groups"][0]["adapter_urns"] == ["media:pdf"]
    assert Manifest.from_json(raw, strict=True) == manifest


def test_find_cap_by_urn_alias_and_equivalence() -> None:
    manifest = Manifest.from_json(vector_manifest_bytes())
    by_urn = manifest.find_cap("cap:out=media:void;peer-fail")
    assert by_urn is not None and by_urn.title == "Peer Fail"
    assert manifest.find_cap("peer-fail") is by_urn
    assert manifest.find_cap("cap:peer-fail;out=media:void") is by_urn
    assert manifest.find_cap("identity") is manifest.all_caps()[0]
    assert manifest.find_cap("nope") is None
    assert manifest.find_cap("cap:nope") is None


def test_cap_urn_is_canonicalized_and_bad_urn_refused() -> None:
    cap = CapDef(urn="cap:out=media:void;in=media:;x", title="X", aliases="x")
    assert cap.urn == "cap:out=media:void;x"
    assert cap.aliases == ("x",)
    with pytest.raises(ManifestUrnError) as info:
        CapDef(urn="cap:in=?;x", title="X", aliases="x")
    assert info.value.field == "urn"


# -- parse errors -----------------------------------------------------------------


def _vector_dict() -> dict:
    return json.loads(vector_manifest_bytes())


def _cap(data: dict, index: int = 1) -> dict:
    return data["cap_groups"][0]["caps"][index]


def _refused(data: dict) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        Manifest.from_dict(data)
    return info.value


def test_parse_refuses_bad_json_and_utf8() -> None:
    with pytest.raises(ManifestParseError):
        Manifest.from_json(b"{not json")
    with pytest.raises(ManifestParseError):
        Manifest.from_json(b"\xff\xfe")
    with pytest.raises(ManifestParseError):
        Manifest.from_json("[]")


@pytest.mark.parametrize(
    "key", ["name", "version", "channel", "registry_url", "description", "cap_groups"]
)
def test_parse_refuses_missing_top_level_key(key: str) -> None:
    data = _vector_dict()
    del data[key]
    error = _refused(data)
    assert isinstance(error, ManifestParseError)
    assert error.field == key


def test_parse_refuses_bad_channel_and_empty_groups() -> None:
    data = _vector_dict()
    data["channel"] = "beta"
    assert _refused(data).field == "channel"
    data = _vector_dict()
    data["cap_groups"] = []
    assert _refused(data).field == "cap_groups"


@pytest.mark.parametrize("aliases", [None, [], "absent"])
def test_parse_refuses_missing_or_empty_aliases(aliases: object) -> None:
    data = _vector_dict()
    if aliases == "absent":
        del _cap(data)["aliases"]
    else:
        _cap(data)["aliases"] = aliases
    error = _refused(data)
    assert isinstance(error, ManifestParseError)
    assert error.cap_urn == "cap:peer-echo"
    assert error.field == "aliases"


def test_parse_refuses_unknown_arg_and_output_keys() -> None:
    data = _vector_dict()
    _cap(data)["args"][0]["slug"] = "x"
    error = _refused(data)
    assert (error.cap_urn, error.field) == ("cap:peer-echo", "args[0].slug")
    assert "slug" in str(error)
    data = _vector_dict()
    _cap(data)["outputs"][0]["file_path"] = True
    assert _refused(data).field == "outputs[0].file_path"


def test_parse_refuses_missing_names() -> None:
    data = _vector_dict()
    del _cap(data)["args"][0]["name"]
    assert _refused(data).field == "args[0].name"
    data = _vector_dict()
    del _cap(data)["outputs"][0]["name"]
    assert _refused(data).field == "outputs[0].name"


def test_parse_refuses_bad_carries_and_sources() -> None:
    data = _vector_dict()
    _cap(data)["outputs"][0]["carries"] = "output"
    assert _refused(data).field == "outputs[0].carries"
    data = _vector_dict()
    _cap(data)["args"][0]["sources"] = [{"file_path": "x"}]
    assert _refused(data).field == "args[0].sources[0]"
    data = _vector_dict()
    _cap(data)["args"][0]["sources"] = [{"position": "0"}]
    assert _refused(data).field == "args[0].sources[0].position"


def test_source_read_by_first_known_key() -> None:
    arg = ArgDef.from_json(
        {
            "media_urn": "media:",
            "name": "a",
            "required": True,
            "sources": [{"position": 1, "cli_flag": "--x", "extra": 0}],
        }
    )
    assert arg.sources == (PositionSource(index=1),)


def test_parse_refuses_unparseable_cap_urn() -> None:
    data = _vector_dict()
    _cap(data)["urn"] = "cap:in=?;x"
    error = _refused(data)
    assert isinstance(error, ManifestUrnError)
    assert error.field == "cap_groups[0].caps[1].urn"


def test_parse_wrong_types_never_escape_as_other_errors() -> None:
    for mutate in (
        lambda d: d.__setitem__("cap_groups", {"a": 1}),
        lambda d: d["cap_groups"].__setitem__(0, 5),
        lambda d: _cap(d).__setitem__("args", "x"),
        lambda d: _cap(d)["args"].__setitem__(0, None),
        lambda d: _cap(d)["args"][0].__setitem__("required", "yes"),
        lambda d: _cap(d).__setitem__("version", "1"),
        lambda d: _cap(d).__setitem__("title", 5),
        lambda d: d.__setitem__("pool_declarations", {"capacities": {"all": -1}}),
        lambda d: d.__setitem__("pool_declarations", {"pools": {"p": "cap:x"}}),
    ):
        data = _vector_dict()
        mutate(data)
        assert isinstance(_refused(data), ManifestParseError)


def test_missing_identity_cap() -> None:
    manifest = Manifest(
        name="n",
        version="v",
        description="d",
        cap_groups=[CapGroup(name="g", caps=[CapDef.simple("cap:x", "X", aliases="x")])],
    )
    with pytest.raises(MissingIdentityCapError):
        validate_manifest(manifest)
    data = manifest.to_json()
    with pytest.raises(MissingIdentityCapError):
        Manifest.from_dict(data, strict=True)
    # Non-strict reading does not validate.
    assert Manifest.from_dict(data) == manifest


def test_identity_must_be_exact_text() -> None:
    # cap:effect=none;x is a different cap: the host wants exactly cap:effect=none.
    other = attrs.evolve(identity_cap(), urn="cap:effect=none;x")
    manifest = Manifest(
        name="n", version="v", description="d", cap_groups=[CapGroup(name="g", caps=[other])]
    )
    with pytest.raises(MissingIdentityCapError):
        manifest.validate()
