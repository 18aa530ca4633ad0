"""``cartridge graph run`` (a seed machine; the cartridges grow it) and ``cartridge graph
show``: the agent example, two tool rounds and an answer, resumed after a failed tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "agent"
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def cartridge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=AGENT,
        env={**os.environ, **(env or {})},
    )


def run_agent(
    graphs: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cartridge(
        "graph",
        "run",
        "agent.machine",
        "-c",
        "model.py",
        "-c",
        "weather.py",
        "-c",
        "convert.py",
        "-i",
        "chat=@question.jsonl",
        "--graphs-dir",
        str(graphs),
        *extra,
        env=env,
    )


def test_graph_run_grows_two_tool_rounds_and_answers_then_show_draws_it(tmp_path: Path) -> None:
    done = run_agent(tmp_path / "g", "--report", str(tmp_path / "run.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "out: It is 4 °C and rain in Oslo, that is 39.2 °F.\n"
    assert "── weather-" in done.stderr and "── convert-" in done.stderr
    (saved,) = (tmp_path / "g").glob("*[0-9].json")
    events = [json.loads(x) for x in saved.with_suffix(".events.jsonl").read_text().splitlines()]
    grown = [e for e in events if e["event"] == "op" and e["node"].startswith("model-")]
    assert len(grown) == 20  # two batches of ten ops, each logged with the model that made it
    page = (tmp_path / "run.html").read_text()
    assert page.count("<rect") == 15 and "weather-7" in page
    html = tmp_path / "show.html"
    shown = cartridge(
        "graph", "show", "last", "--graphs-dir", str(tmp_path / "g"), "--html", str(html)
    )
    assert shown.returncode == 0
    assert html.read_text().count("<rect") == 15
    assert shown.stdout.splitlines()[0].startswith("answer-3 [✓ done] (answer)")
    assert shown.stdout.count("[✓ done]") >= 15


def test_a_failed_tool_exits_1_naming_it_and_the_saved_graph_resumes(tmp_path: Path) -> None:
    env = {"AGENT_WEATHER_FAIL_ONCE": str(tmp_path / "failed-once")}
    graphs = tmp_path / "graphs"
    failed = run_agent(graphs, env=env)
    assert failed.returncode == 1
    assert "FAILED node weather-7: UPSTREAM_DOWN" in failed.stderr
    assert "⊘ skipped: input weather-7 failed" in failed.stderr
    (saved,) = graphs.glob("*.json")
    resumed = run_agent(graphs, "--load", str(saved), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "out: It is 4 °C and rain in Oslo, that is 39.2 °F.\n"


def test_usage_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    missing = cartridge("graph", "run", "nope.machine", "--graphs-dir", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr == "error: no machine file at nope.machine\n"
    none = cartridge("graph", "show", "last", "--graphs-dir", str(tmp_path))
    assert none.returncode == 2 and none.stderr.startswith("error: no graphs saved in ")
