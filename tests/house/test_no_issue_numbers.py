"""Issue numbers belong in commit messages: none in the code, its docstrings, the tests, the
benchmarks or the documents a user reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: "issue 17", "issue #17", "issues 17 and 18": a tracker's number in prose.
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
WHERE = ("cartridge_runtime", "tests", "benchmarks", "scripts", "cartridges", "docs", "examples")
TOP_DOCUMENTS = ("README.md", "CHANGELOG.md")


def numbered_lines(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]


def _files() -> list[Path]:
    found = [ROOT / name for name in TOP_DOCUMENTS if (ROOT / name).exists()]
    for top in WHERE:
        found += [
            p
            for p in (ROOT / top).rglob("*")
            if p.suffix in {".py", ".md", ".js", ".sh"}
            and "__pycache__" not in p.parts
            and p != Path(__file__).resolve()
        ]
    return found


def test_no_issue_number_in_code_or_documents() -> None:
    assert numbered_lines(_files()) == []


def test_the_scan_finds_an_issue_number(tmp_path: Path) -> None:
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        note = tmp_path / "x.py"
        note.write_text('"""Done as issue 20 item 5 asks."""\nvalue = 1  # the issue in hand\n')
        assert numbered_lines([note]) == ["x.py:1"]
    finally:
        ROOT = saved
