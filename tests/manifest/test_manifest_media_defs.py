"""A manifest's ``media_defs``: media definitions in the registry's form, shipped with the
cartridge so an engine can hold its outputs to them (HST-24)."""

from __future__ import annotations

import json

import pytest
from capdag.bifaci.manifest import CapManifest

from cartridge_runtime.manifest import Manifest, ManifestParseError

THING = {
    "urn": "media:fmt=json;record;thing",
    "media_type": "application/json",
    "title": "Thing",
    "schema": {"type": "object", "required": ["name"]},
    "validation": {"max_length": 100},
}


def _manifest(**extra: object) -> Manifest:
    return Manifest.build(name="things", version="1.0.0", description="d", **extra)  # type: ignore[arg-type]


def test_without_definitions_the_bytes_are_unchanged() -> None:
    manifest = _manifest()
    assert manifest.media_defs == ()
    assert "media_defs" not in manifest.to_json()


def test_definitions_go_out_and_come_back() -> None:
    manifest = _manifest(media_defs=[THING])
    data = manifest.to_json_bytes()
    assert json.loads(data)["media_defs"] == [THING]
    again = Manifest.from_json(data, strict=True)
    assert again.media_defs == (THING,) and again == manifest


def test_the_reference_reads_past_them() -> None:
    data = json.loads(_manifest(media_defs=[THING]).to_json_bytes())
    read = CapManifest.from_dict(data)
    assert read.name == "things"


@pytest.mark.parametrize(
    ("entry", "field"),
    [("media:x", "media_defs[0]"), ({"title": "no urn"}, "media_defs[0].urn")],
)
def test_a_definition_without_its_urn_is_refused(entry: object, field: str) -> None:
    data = json.loads(_manifest().to_json_bytes())
    data["media_defs"] = [entry]
    with pytest.raises(ManifestParseError) as caught:
        Manifest.from_dict(data)
    assert caught.value.field == field
