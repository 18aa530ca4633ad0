"""Piped output is never wrapped short (cap URNs stay whole), and the demo shows the machine
file's own names and a readable stats line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import attrs

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "cartridges" / "text.py"
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_piped_manifest_keeps_every_cap_urn_whole() -> None:
    from cartridge_runtime.manifest import Manifest

    done = subprocess.run(
        [*CLI, "manifest", str(TEXT)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    json_text = subprocess.run(
        [*CLI, "manifest", str(TEXT), "--json"], capture_output=True, text=True, timeout=120
    ).stdout
    caps = list(Manifest.from_json(json_text).iter_caps())
    assert caps
    for cap in caps:
        assert any(cap.urn in line for line in done.stdout.splitlines()), cap.urn


def test_the_demo_console_does_not_wrap_when_piped() -> None:
    demo = _demo()
    assert demo.console.width >= 1000  # the test's stdout is not a terminal


def test_the_demo_shows_the_machine_files_own_names() -> None:
    demo = _demo()
    lines = demo.wiring_lines(ROOT / "cartridges" / "samples" / "machines" / "route.machine")
    assert lines[0] == "doc -> split -> words"
    assert "(words, min_length=5) -> route -> (kept=long, dropped=short)" in lines
    assert not any("edge_" in line or "n0" in line for line in lines)


def test_the_demo_stats_line_is_words_not_a_repr() -> None:
    demo = _demo()

    @attrs.frozen
    class Stats:
        drops: int = 0
        no_route: int = 2

    line = demo.stats_line(Stats())
    assert line == "0 drops, 2 no route"


def test_progress_that_shows_nothing_new_is_skipped(tmp_path: Path) -> None:
    import io

    from cartridge_runtime.cli._call_outputs import Renderer, plan_outputs

    err = io.StringIO()
    renderer = Renderer(
        plan_outputs(None, [], None), io.BytesIO(), err, out_tty=False, err_tty=False, label="x"
    )
    for step in range(1000):  # a handler reporting per chunk
        renderer.progress(step / 100_000, "reading")
    renderer.progress(0.5, "reading")
    renderer.progress(0.5, "writing")
    assert err.getvalue().splitlines() == [
        "[PROGRESS 0%] reading",
        "[PROGRESS 1%] reading",
        "[PROGRESS 50%] reading",
        "[PROGRESS 50%] writing",
    ]
