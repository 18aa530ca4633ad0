"""File, folder and glob arguments: expansion, junk skipped, order, sequences, typed errors
(DET-8 to DET-10)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from cartridge_runtime.discovery import RootNotFound
from cartridge_runtime.planner._detect import (
    Decision,
    InputNotFound,
    InputUnreadable,
    InvalidGlob,
    NoFilesMatched,
    NoInputs,
    expand_inputs,
    resolve_inputs,
)
from cartridge_runtime.urn import MediaUrn

JUNK = [
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
    "._b.txt",
    "~$report.docx",
    "notes.txt~",
    "draft.swp",
    "old.bak",
    "__MACOSX/._a.txt",
    "__MACOSX/a.txt",
    ".git/config",
    "sub/__pycache__/m.cpython-311.pyc",
]
REAL = ["a.txt", "b.txt", "sub/c.txt", "sub/deeper/d.pdf", ".hidden.txt"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    for name in JUNK + REAL:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"%PDF-1.4\n" if name.endswith(".pdf") else b"words\n")
    return root


def test_a_folder_expands_to_its_files_sorted_with_junk_skipped(tree: Path) -> None:
    paths = expand_inputs([tree])
    assert paths == tuple(sorted((tree / name).absolute() for name in REAL))
    assert all(p.is_absolute() for p in paths)


def test_a_glob_matches_files_and_skips_junk(tree: Path) -> None:
    paths = expand_inputs([str(tree / "*.txt")])
    assert [p.name for p in paths] == ["a.txt", "b.txt"]  # no ._b.txt, no hidden file
    deep = expand_inputs([str(tree / "**" / "*.txt")])
    assert [p.relative_to(tree).as_posix() for p in deep] == ["a.txt", "b.txt", "sub/c.txt"]


def test_the_same_file_named_twice_is_listed_once(tree: Path) -> None:
    link = tree.parent / "alias.txt"
    link.symlink_to(tree / "a.txt")
    paths = expand_inputs([tree / "a.txt", str(tree / "a.txt"), str(tree / "a*"), link])
    assert paths == ((tree / "a.txt").absolute(),)


def test_a_folder_that_links_to_itself_ends(tree: Path) -> None:
    (tree / "sub" / "loop").symlink_to(tree)
    paths = expand_inputs([tree])
    assert len(paths) == len(REAL)


def test_an_explicit_junk_name_is_kept(tree: Path) -> None:
    assert expand_inputs([tree / "Thumbs.db"]) == ((tree / "Thumbs.db").absolute(),)


def test_typed_errors(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(NoInputs):
        expand_inputs([])
    with pytest.raises(InputNotFound, match="nowhere"):
        expand_inputs([tree / "a.txt", tmp_path / "nowhere"])
    with pytest.raises(NoFilesMatched, match=r"\*\.xyz"):
        expand_inputs([str(tree / "*.xyz")])
    with pytest.raises(InvalidGlob, match="unbalanced"):
        expand_inputs([str(tree / "[a.txt")])
    empty = tmp_path / "empty"
    (empty / "__MACOSX").mkdir(parents=True)
    (empty / ".DS_Store").write_bytes(b"\0")
    with pytest.raises(NoFilesMatched):
        expand_inputs([empty])


def test_a_path_with_glob_characters_that_exists_is_a_file(tmp_path: Path) -> None:
    odd = tmp_path / "a[1].txt"
    odd.write_text("x")
    assert expand_inputs([str(odd)]) == (odd.absolute(),)


def test_one_file_is_one_value_a_folder_or_glob_is_a_sequence(tree: Path) -> None:
    one = resolve_inputs([tree / "a.txt"])
    assert not one.is_sequence and len(one.files) == 1
    assert one.common_media == MediaUrn.parse("media:enc=utf-8;ext=txt;plain-text")
    single = tree / "sub" / "deeper"
    assert resolve_inputs([single]).is_sequence  # a folder names a set, even of one file
    assert resolve_inputs([str(tree / "a.*")]).is_sequence
    two = resolve_inputs([tree / "a.txt", tree / "b.txt"])
    assert two.is_sequence and two.common_media is not None


def test_a_mixed_set_has_no_common_media(tree: Path) -> None:
    mixed = resolve_inputs([tree])
    assert mixed.common_media is None
    by_name = {f.path.name: f for f in mixed.files}
    assert str(by_name["d.pdf"].media) == "media:document;ext=pdf"
    assert by_name["a.txt"].decided_by is Decision.CONFIRMED
    assert mixed.paths == expand_inputs([tree])


def test_a_declared_urn_applies_to_every_file(tree: Path) -> None:
    declared = resolve_inputs([tree], declared="media:enc=utf-8")
    assert {str(f.media) for f in declared.files} == {"media:enc=utf-8"}
    assert {f.decided_by for f in declared.files} == {Decision.DECLARED}
    assert declared.common_media == MediaUrn.parse("media:enc=utf-8")


def test_lists_are_seen_in_the_urn(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    (tmp_path / "o.json").write_text('{"a": 1}')
    found = {f.path.name: f for f in resolve_inputs([tmp_path]).files}
    assert found["t.csv"].is_list and found["t.csv"].is_record
    assert not found["o.json"].is_list and found["o.json"].is_record


def test_a_str_path_is_also_accepted_alone(tree: Path) -> None:
    assert resolve_inputs(os.fspath(tree / "a.txt")).paths == ((tree / "a.txt").absolute(),)


def test_input_errors_pickle_with_their_fields(tmp_path: Path) -> None:
    for error in (
        InvalidGlob("a[", "unbalanced"),
        InputUnreadable(tmp_path, "it is a folder"),
        NoInputs(),
        RootNotFound(tmp_path / "x"),
    ):
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert (str(back), back.path, back.report) == (str(error), error.path, error.report)


def test_detection_and_a_warm_discovery_import_no_io_framework() -> None:
    code = (
        "import sys; import cartridge_runtime.planner._detect, cartridge_runtime.discovery; "
        "print([m for m in ('anyio', 'trio', 'subprocess', 'cartridge_runtime.engine') "
        "if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
