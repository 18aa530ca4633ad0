"""Consistency of the protocol specification in ``protocol_spec/``.

Code, tests and the conformance kit cite rule ids such as ``HSK-4``. These
tests make sure every id they can cite is defined exactly once, in the chapter
``rules.json`` names, with the level ``rules.json`` gives, and that no chapter
mentions an id that does not exist. No IO beyond reading the spec files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

SPEC_DIR = Path(__file__).resolve().parents[2] / "protocol_spec"
RULES_FILE = SPEC_DIR / "rules.json"

AREAS = (
    "FRM",
    "TYP",
    "HSK",
    "REQ",
    "FLW",
    "ERR",
    "URN",
    "MAN",
    "CLI",
    "HST",
    "MCH",
    "PLAN",
    "DET",
    "DSC",
    "GRW",
    "RLY",
)
#: A well-formed rule id: one of the areas, a dash, a positive decimal number.
ID_PATTERN = re.compile(r"^(?:" + "|".join(AREAS) + r")-[1-9][0-9]*$")
#: Any mention of a rule id in running text.
MENTION = re.compile(r"\b(?:" + "|".join(AREAS) + r")-[0-9]+\b")
#: The bullet that defines a rule: ``- **HSK-4** (MUST) ...``.
DEFINITION = re.compile(r"^- \*\*([A-Z]{3,4}-[0-9]+)\*\* \((MUST|SHOULD)\) \S", re.MULTILINE)


def _rules() -> list[dict[str, Any]]:
    """Load ``rules.json`` and check its outer shape."""
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, list) and data, "rules.json must be a non-empty list"
    return data


def _markdown_files() -> list[Path]:
    """Every Markdown file of the specification, vector READMEs included."""
    files = sorted(SPEC_DIR.rglob("*.md"))
    assert files
    return files


def _chapters() -> list[Path]:
    """The numbered chapter files, where rules are defined."""
    return sorted(SPEC_DIR.glob("[0-9][0-9]-*.md"))


def test_rules_json_entries_are_well_formed() -> None:
    for entry in _rules():
        assert set(entry) == {"id", "level", "title", "file"}, entry
        assert ID_PATTERN.match(entry["id"]), entry["id"]
        assert entry["level"] in {"MUST", "SHOULD"}, entry
        assert isinstance(entry["title"], str) and entry["title"].strip(), entry
        assert (SPEC_DIR / entry["file"]).is_file(), entry


def test_rule_ids_are_unique() -> None:
    ids = [entry["id"] for entry in _rules()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, duplicates


def test_each_area_is_numbered_without_gaps() -> None:
    numbers: dict[str, list[int]] = {}
    for entry in _rules():
        area, number = entry["id"].split("-")
        numbers.setdefault(area, []).append(int(number))
    for area, seen in numbers.items():
        assert sorted(seen) == list(range(1, len(seen) + 1)), area


@pytest.mark.parametrize("entry", _rules(), ids=lambda e: e["id"])
def test_rule_is_defined_in_its_file_with_its_level(entry: dict[str, Any]) -> None:
    text = (SPEC_DIR / entry["file"]).read_text(encoding="utf-8")
    definitions = [m for m in DEFINITION.finditer(text) if m.group(1) == entry["id"]]
    assert len(definitions) == 1, (
        f"{entry['id']} defined {len(definitions)} times in {entry['file']}"
    )
    assert definitions[0].group(2) == entry["level"]


def test_every_definition_is_listed_once_overall() -> None:
    defined: list[str] = []
    for path in _chapters():
        defined.extend(m.group(1) for m in DEFINITION.finditer(path.read_text(encoding="utf-8")))
    assert sorted(defined) == sorted(entry["id"] for entry in _rules())


def test_every_mentioned_id_exists() -> None:
    known = {entry["id"] for entry in _rules()}
    unknown: list[str] = []
    for path in _markdown_files():
        for mention in MENTION.findall(path.read_text(encoding="utf-8")):
            if mention not in known:
                unknown.append(f"{path.relative_to(SPEC_DIR)}: {mention}")
    assert not unknown, unknown


def test_readme_lists_every_rule() -> None:
    readme = (SPEC_DIR / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| ([A-Z]{3,4}-[0-9]+) \| (MUST|SHOULD) \|", readme, re.MULTILINE))
    assert rows == {(entry["id"], entry["level"]) for entry in _rules()}


def test_conformance_checks_cite_rules() -> None:
    text = (SPEC_DIR / "11-conformance.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (CK-[0-9]{2}) [^|]+\|.*\| ([^|]+) \|$", text, re.MULTILINE)
    assert rows, "no checks found"
    check_ids = [check for check, _ in rows]
    assert len(check_ids) == len(set(check_ids))
    known = {entry["id"] for entry in _rules()}
    for check, cited in rows:
        ids = MENTION.findall(cited)
        assert ids, f"{check} cites no rule"
        assert set(ids) <= known, (check, ids)


def test_every_rule_id_the_code_cites_exists() -> None:
    """A rule id in the package's code, docstrings or messages names a rule of the spec."""
    known = {entry["id"] for entry in _rules()}
    package = SPEC_DIR.parent / "cartridge_runtime"
    cited: dict[str, str] = {}
    for path in package.rglob("*.py"):
        for match in MENTION.finditer(path.read_text(encoding="utf-8")):
            cited.setdefault(match.group(0), str(path.relative_to(package)))
    assert cited, "the package cites rule ids"
    unknown = {rule: where for rule, where in cited.items() if rule not in known}
    assert unknown == {}
