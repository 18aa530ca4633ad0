"""``cartridge plan`` and ``cartridge run --to`` as a new user meets them: test caps never
planned, plans that need an argument marked and bound with ``--arg``, "no way" explained,
what can be made without ``--to``, ``--media`` and ``-``, folders and globs, ``--from-dir``
(repeated, naming the refused), and planned outputs and records named after the input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARTRIDGES = ROOT / "cartridges"
SAMPLES = CARTRIDGES / "samples"
WORD = "media:enc=utf-8;word"
KEPT = "media:enc=utf-8;kept;word"
MATCHES = "media:fmt=json;json-match;list"


def cartridge(
    *args: str, stdin: str | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    home = home or Path(tempfile.mkdtemp(prefix="cartridge-home-"))
    # A temporary folder of its own: what a command leaves behind is its, not a neighbour's.
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        XDG_CACHE_HOME=str(home / "cache"),
        CARTRIDGE_HOME=str(home),
        TMPDIR=str(home / "tmp"),
    )
    return subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        input=stdin,
        timeout=180,
    )


def _all() -> list[str]:
    args = []
    for name in ("text", "jsonkit", "archive", "wordkit", "interop"):
        args += ["-c", str(CARTRIDGES / f"{name}.py")]
    return args


def test_test_caps_are_not_planned_over_the_bundled_cartridges(tmp_path: Path) -> None:
    csv = tmp_path / "table.csv"
    csv.write_text("a,b\n1,2\n")
    out = cartridge("plan", str(csv), "--to", WORD, *_all(), "--json")
    document = json.loads(out.stdout)
    aliases = {s.get("alias") for p in document["plans"] for s in p["steps"]}
    assert not aliases & {"sha256", "echo", "fail", "progress", "words", "split-upper"}
    md = cartridge("plan", str(SAMPLES / "sample.md"), "--to", KEPT, *_all(), "--json")
    plans = json.loads(md.stdout)["plans"]
    assert plans[0]["description"] == "Split → ForEach → Route"
    used = {s.get("alias") for p in plans for s in p["steps"]}
    assert not used & {"fail", "sha256", "bang", "slow", "quiet", "flaky", "pair"}


def test_a_plan_needing_an_argument_is_marked_and_bound_with_arg(tmp_path: Path) -> None:
    sample = str(SAMPLES / "sample.json")
    jsonkit = ["-c", str(CARTRIDGES / "jsonkit.py")]
    listed = cartridge("plan", sample, "--to", MATCHES, *jsonkit)
    assert listed.returncode == 0, listed.stderr
    assert "query  (needs path)" in listed.stdout
    refused = cartridge("run", "--to", MATCHES, sample, *jsonkit, "--runs-dir", str(tmp_path))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: plan 1 (Query a JSON document) needs path: give --arg path=VALUE"
    )
    ran = cartridge("run", "--to", MATCHES, sample, *jsonkit, "--arg", "path=$.store.book[0].title",
                    "--runs-dir", str(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Sayings of the Century" in ran.stdout
    assert 'path="$.store.book[0].title"' in ran.stderr
    wrong = cartridge("run", "--to", MATCHES, sample, *jsonkit, "--arg", "nope=1")
    assert wrong.returncode == 2 and "no step of this plan takes an argument named nope" in (
        wrong.stderr
    )


def test_no_way_names_the_reason_the_nearest_targets_and_mixed_files(tmp_path: Path) -> None:
    out = cartridge("plan", str(SAMPLES / "sample.md"), "--to", "media:word", *_all())
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert lines[0].endswith("no cap gives exactly media:word")
    assert lines[1].startswith(f"nearest targets that can be made: {WORD} (1 step)")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(SAMPLES / "sample.md", mixed / "a.md")
    (mixed / "t.csv").write_text("a,b\n1,2\n")
    out = cartridge("plan", str(mixed), "--to", WORD, *_all())
    assert out.returncode == 1
    note = out.stderr.strip().splitlines()[-1]
    assert note.startswith("note: the files are of mixed types (1 md, 1 csv), so the source is")
    assert "--media" in note


def test_plan_without_to_lists_what_can_be_made() -> None:
    out = cartridge("plan", str(SAMPLES / "sample.md"), "-c", str(CARTRIDGES / "wordkit.py"),
                    "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    targets = {t["media"]: t for t in json.loads(out.stdout)["targets"]}
    assert targets[WORD]["min_steps"] == 1 and targets[KEPT]["min_steps"] == 3
    text = cartridge("plan", str(SAMPLES / "sample.md"), "-c", str(CARTRIDGES / "wordkit.py"))
    assert text.stdout.splitlines()[0].endswith("what can be made (steps, ways, media):")
    assert any(line.split("\t")[2:] == [KEPT] for line in text.stdout.splitlines()[1:])


def test_media_and_stdin(tmp_path: Path) -> None:
    wordkit = ["-c", str(CARTRIDGES / "wordkit.py")]
    data = tmp_path / "notes.data"
    data.write_text("alpha beta gamma\n")
    declared = cartridge("plan", str(data), "--to", WORD, "--media", "media:enc=utf-8", *wordkit,
                         "--json")  # fmt: skip
    assert json.loads(declared.stdout)["source"] == "media:enc=utf-8"
    piped = cartridge("run", "--to", KEPT, "-", *wordkit, "--runs-dir", str(tmp_path / "r"),
                      stdin="tiny elephants ox giraffes\n")  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.split() == ["elephants", "giraffes"] or set(piped.stdout.split()) == {
        "elephants", "giraffes", "tiny"}  # fmt: skip
    planned = cartridge("plan", "-", "--to", WORD, *wordkit, "--json", stdin="one two\n")
    assert json.loads(planned.stdout)["source"] == "media:enc=utf-8"
    home = Path(tempfile.mkdtemp(prefix="cartridge-home-"))
    empty = cartridge("plan", "-", "--to", WORD, *wordkit, stdin="", home=home)
    assert empty.returncode == 2 and "standard input was empty" in empty.stderr
    assert not list((home / "tmp").glob("cartridge-plan-*/stdin"))


def test_run_to_a_glob_names_each_output_and_record_after_its_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "one.md").write_text("# One\n\nalpha beta gamma delta\n")
    (data / "two words.md").write_text("# Two\n\nepsilon zeta\n")
    home = tmp_path / "home"
    runs = tmp_path / "runs"
    out = cartridge("run", "--to", KEPT, str(data / "*.md"), "-c", str(CARTRIDGES / "wordkit.py"),
                    "-o", str(tmp_path / "out"), "--runs-dir", str(runs), home=home)  # fmt: skip
    assert out.returncode == 0, out.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["one.kept-word.txt", "two words.kept-word.txt"]
    assert "alpha" in (tmp_path / "out" / "one.kept-word.txt").read_text()
    records = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
    sources = sorted(r["machine"] for r in records)
    assert sources == [f"{data / 'one.md'} --to {KEPT}", f"{data / 'two words.md'} --to {KEPT}"]
    assert all(r["planned"]["to"] == KEPT for r in records)
    assert not list((home / "tmp").glob("cartridge-plan-*"))


def test_run_to_a_missing_glob_leaves_no_scratch_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = cartridge("run", "--to", KEPT, str(tmp_path / "*.md"), "-c",
                    str(CARTRIDGES / "wordkit.py"), home=home)  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith("error: ")
    assert (home / "tmp").is_dir() and not list((home / "tmp").glob("cartridge-plan-*"))


def test_from_dir_repeats_add_up_names_refusals_and_runs(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    shutil.copy(CARTRIDGES / "text.py", first / "text.py")
    shutil.copy(CARTRIDGES / "wordkit.py", second / "wordkit.py")
    broken = second / "needy.py"
    broken.write_text(
        "#!/usr/bin/env python3\nimport plans_module_not_installed\n"
        "from cartridge_runtime.runtime import CartridgeRuntime\n"
        "if __name__ == '__main__':\n    CartridgeRuntime(None).run()\n"
    )
    home = tmp_path / "home"
    args = ["plan", str(SAMPLES / "sample.md"), "--to", KEPT, "--from-dir", str(first),
            "--from-dir", str(second), "--json"]  # fmt: skip
    out = cartridge(*args, home=home)
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    carts = {s.get("cartridge") for p in document["plans"] for s in p["steps"]} - {None}
    assert carts == {"text", "wordkit"}  # both folders count, not only the last
    (refused,) = document["refused"]
    assert (
        refused["path"].endswith("needy.py") and "plans_module_not_installed" in (refused["reason"])
    )
    assert "refused: " in out.stderr and "needy.py" in out.stderr
    ran = cartridge("run", "--to", KEPT, str(SAMPLES / "sample.md"), "--from-dir", str(second),
                    "--runs-dir", str(tmp_path / "runs"), home=home)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Cartridge" in ran.stdout.split()
