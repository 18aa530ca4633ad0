"""One run as one self-contained HTML page: the machine's graph (the failed or interrupted
step marked), its inputs (with their paths) and outputs (sizes, where written), a timeline
with a time axis, per-step totals, the runs a resumed run reused, errors and the cartridges'
stderr tails.

:func:`render_report` is a pure function of a run record and its events (no network, no
external file: the styles, the SVG graph and the small script are inline). The script only
marks the page ready and lists any script error in the page itself, so a headless browser can
tell a page that renders from one that does not.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..engine import RunRecord, step_totals

__all__ = ("render_report",)

_STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#555}.ok{color:#17692b}.failed{color:#b3261e}.interrupted,.running,.stale{color:#8a5a00}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:3px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}
.timeline{position:relative;border-left:1px solid #999}
.row{position:relative;height:18px;margin:2px 0}
.row .label{position:absolute;left:-210px;width:200px;text-align:right;font-size:12px;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.bar{position:absolute;height:14px;top:2px;background:#4a7fd4;border-radius:2px;min-width:2px}
.bar.hit{background:repeating-linear-gradient(45deg,#3c9a54,#3c9a54 4px,#6cc585 4px,#6cc585 8px)}
.bar.absent,.bar.failed{background:#c2493f}
.bar.interrupted{background:repeating-linear-gradient(90deg,#d99a1e,#d99a1e 6px,#f3d48a 6px,#f3d48a 9px)}
.axis{position:relative;height:22px;border-top:1px solid #999;font-size:11px;color:#555}
.tick{position:absolute;top:0;height:5px;border-left:1px solid #999}
.tick span{position:absolute;top:6px;transform:translateX(-50%);white-space:nowrap}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:300px}
pre:empty{display:none}
svg text{font:12px system-ui,sans-serif}
"""

_SCRIPT: Final = """
(function(){
  var errors = [];
  function show(){ document.getElementById('page-errors').textContent = errors.join('\\n'); }
  window.addEventListener('error', function(e){ errors.push(String(e.message)); show(); });
  var original = console.error;
  console.error = function(){ errors.push(Array.prototype.join.call(arguments, ' '));
    show(); return original.apply(console, arguments); };
  document.addEventListener('DOMContentLoaded', function(){
    var bars = document.querySelectorAll('.bar').length;
    document.body.setAttribute('data-bars', String(bars));
    document.body.setAttribute('data-ready', '1');
  });
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _graph_svg(graph: Mapping[str, Any], marked: Mapping[str, str] | None = None) -> str:
    """The machine as columns: input nodes, then each step and the nodes it makes; a step in
    ``marked`` (``failed`` or ``interrupted``) is drawn in that state's colour."""
    marked = marked or {}
    steps: Sequence[Mapping[str, Any]] = graph.get("steps", ())
    nodes: Sequence[Mapping[str, Any]] = graph.get("nodes", ())
    depth: dict[str, int] = {n["name"]: 0 for n in nodes if n.get("role") == "input"}
    step_depth: dict[int, int] = {}
    for _ in range(len(steps) + 1):  # settles in at most one pass per step
        for index, step in enumerate(steps):
            d = 1 + max((depth.get(name, 0) for name in step["inputs"]), default=0)
            step_depth[index] = d
            for name in step["outputs"]:
                depth[name] = d + 1
    columns: dict[int, list[tuple[str, str]]] = {}
    for node in nodes:
        columns.setdefault(depth.get(node["name"], 0), []).append(("node", node["name"]))
    for index in range(len(steps)):
        columns.setdefault(step_depth[index], []).append(("step", str(index)))
    where: dict[tuple[str, str], tuple[int, int]] = {}
    for col, members in columns.items():
        for row, member in enumerate(members):
            where[member] = (30 + col * 170, 30 + row * 60)
    width = 60 + (max(columns, default=0) + 1) * 170
    height = 60 + max((len(m) for m in columns.values()), default=1) * 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="machine graph">'
    ]
    for index, step in enumerate(steps):
        sx, sy = where[("step", str(index))]
        for name in step["inputs"]:
            if ("node", name) in where:
                nx, ny = where[("node", name)]
                parts.append(
                    f'<line x1="{nx + 130}" y1="{ny + 15}" x2="{sx}" y2="{sy + 15}" stroke="#888"/>'
                )
        for name in step["outputs"]:
            if ("node", name) in where:
                nx, ny = where[("node", name)]
                parts.append(
                    f'<line x1="{sx + 130}" y1="{sy + 15}" x2="{nx}" y2="{ny + 15}" stroke="#888"/>'
                )
    for node in nodes:
        x, y = where[("node", node["name"])]
        fill = {"input": "#e3efff", "output": "#e6f4ea"}.get(node.get("role", ""), "#f3f3f3")
        dash = ' stroke-dasharray="4 2"' if node.get("per_item") else ""
        parts.append(
            f'<rect x="{x}" y="{y}" width="130" height="30" rx="15" fill="{fill}" '
            f'stroke="#777"{dash}><title>{_e(node["name"])}: {_e(node.get("media", ""))}</title>'
            f'</rect><text x="{x + 65}" y="{y + 19}" text-anchor="middle">{_e(node["name"])}</text>'
        )
    for index, step in enumerate(steps):
        x, y = where[("step", str(index))]
        state = marked.get(step["name"], "")
        fill, stroke, width = _STEP_COLOURS.get(state, ("#fff7e0", "#a67c00", 1))
        note = f" ({state})" if state else ""
        parts.append(
            f'<rect x="{x}" y="{y}" width="130" height="30" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{width}" class="step {state}" data-step="{_e(step["name"])}">'
            f"<title>{_e(step['cap'])}{_e(note)}</title></rect>"
            f'<text x="{x + 65}" y="{y + 19}" text-anchor="middle">{_e(step["name"])}{_e(note)}'
            "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


#: A step's fill, stroke and stroke width in the graph, by the state it ended in.
_STEP_COLOURS: Final = {
    "failed": ("#fbe3e1", "#b3261e", 3),
    "interrupted": ("#fdf0d2", "#8a5a00", 3),
}


def _calls(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One bar per step call that ran (or was replayed): start, end, how it ended."""
    bars = []
    for e in events:
        if e.get("event") == "StepInterrupted":
            items = e.get("items") or [None]
            for item in items:
                bars.append(
                    {
                        "step": e["step"],
                        "item": item,
                        "start": float(e.get("started", 0.0)),
                        "end": float(e["t"]),
                        "outcome": "interrupted",
                        "cache": "",
                    }
                )
            continue
        if e.get("event") == "StepFinished" and e.get("outcome") != "skipped":
            end = float(e["t"])
            bars.append(
                {
                    "step": e["step"],
                    "item": e.get("item"),
                    "start": max(end - float(e.get("seconds", 0.0)), 0.0),
                    "end": end,
                    "outcome": e.get("outcome", "ok"),
                    "cache": e.get("cache", ""),
                }
            )
    return bars


def _timeline(events: Sequence[Mapping[str, Any]], error: Mapping[str, Any] | None) -> str:
    bars = _calls(events)
    if error and error.get("step"):
        started = [
            e for e in events if e.get("event") == "StepStarted" and e["step"] == error["step"]
        ]
        if started:
            end = max(float(e["t"]) for e in events) if events else 0.0
            bars.append(
                {
                    "step": error["step"],
                    "item": error.get("item"),
                    "start": float(started[-1]["t"]),
                    "end": end,
                    "outcome": "failed",
                    "cache": "",
                }
            )
    if not bars:
        return "<p>No step call ran.</p>"
    total = max(max(b["end"] for b in bars), 1e-6)
    rows = []
    for bar in sorted(bars, key=lambda b: (b["start"], str(b["step"]))):
        left = 100.0 * bar["start"] / total
        width = max(100.0 * (bar["end"] - bar["start"]) / total, 0.2)
        item = "" if bar["item"] is None else f" [{bar['item']}]"
        classes = " ".join(c for c in ("bar", bar["cache"], bar["outcome"]) if c)
        note = "cache hit" if bar["cache"] == "hit" else bar["outcome"]
        rows.append(
            f'<div class="row"><span class="label">{_e(bar["step"])}{_e(item)}</span>'
            f'<div class="{classes}" style="left:{left:.3f}%;width:{width:.3f}%" '
            f'title="{_e(bar["step"])}{_e(item)}: {bar["end"] - bar["start"]:.3f} s, '
            f'{_e(note)}"></div></div>'
        )
    return (
        f'<div style="margin-left:210px"><div class="timeline">{"".join(rows)}</div>'
        f"{_axis(total)}"
        f'<p class="meta">Seconds since the run started; green striped bars were replayed from '
        f"the step cache, amber ones were running when the run was interrupted.</p></div>"
    )


def _tick_step(total: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about five ticks over ``total``."""
    raw = total / 5
    power = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * power) for m in (1, 2, 5, 10) if m * power >= raw)


def _axis(total: float) -> str:
    """The time axis under the timeline: ticks at round seconds, each labelled."""
    step = _tick_step(total)
    digits = max(0, -math.floor(math.log10(step)))
    ticks = []
    for n in range(int(total / step + 1e-9) + 1):
        at = n * step
        ticks.append(
            f'<div class="tick" style="left:{100.0 * at / total:.3f}%">'
            f"<span>{at:.{digits}f} s</span></div>"
        )
    return f'<div class="axis" aria-label="time axis">{"".join(ticks)}</div>'


def _totals(events: Sequence[Mapping[str, Any]]) -> str:
    totals = step_totals(events)
    if not totals:
        return "<p>No step ran.</p>"
    head = (
        "<tr><th>step</th><th>calls</th><th>items</th><th>cache hits</th><th>cache misses</th>"
        "<th>skipped</th><th>absent</th><th>interrupted</th><th>bytes in</th><th>bytes out</th>"
        "<th>time (s)</th></tr>"
    )
    rows = [
        f"<tr><td>{_e(name)}</td><td>{t['calls']}</td><td>{t['items']}</td><td>{t['hits']}</td>"
        f"<td>{t['misses']}</td><td>{t['skipped']}</td><td>{t['absent']}</td>"
        f"<td>{t['interrupted']}</td>"
        f"<td>{_size(t['bytes_in'])}</td><td>{_size(t['bytes_out'])}</td>"
        f"<td>{t['seconds']:.3f}</td></tr>"
        for name, t in totals.items()
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _marked(events: Sequence[Mapping[str, Any]], error: Mapping[str, Any] | None) -> dict[str, str]:
    """The steps drawn in a state's colour: the failed one, those interrupted."""
    marked = {str(e["step"]): "interrupted" for e in events if e.get("event") == "StepInterrupted"}
    if error and error.get("step"):
        marked[str(error["step"])] = "failed"
    return marked


def _inputs(facts: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(name)}</td><td>{_size(int(f.get('size', 0)))}</td>"
        f"<td>{_e(f.get('path') or ('streamed' if f.get('streamed') else 'given inline'))}</td>"
        f"<td><code>{_e(str(f.get('sha256', ''))[:16])}</code></td></tr>"
        for name, f in facts.get("inputs", {}).items()
    )
    head = "<tr><th>input</th><th>size</th><th>from</th><th>sha256</th></tr>"
    return f"<h2>Inputs</h2><table>{head}{rows}</table>"


def _outputs(facts: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str:
    """Each output: its size (from the event log) and where it was written (the command's
    record of it), or why there is none."""
    sizes: dict[str, int] = {}
    for e in events:
        if e.get("event") == "MachineOutputData":
            sizes[str(e["output"])] = sizes.get(str(e["output"]), 0) + int(e.get("bytes", 0))
    written: Mapping[str, Any] = facts.get("outputs") or {}
    names = [
        n["name"] for n in facts.get("graph", {}).get("nodes", ()) if n.get("role") == "output"
    ]
    names += [n for n in written if n not in names]
    if not names:
        return ""
    ended = facts.get("status") == "ok"
    rows = []
    for name in names:
        place = written.get(name, {})
        size = int(place.get("bytes", sizes.get(name, 0)))
        where = place.get("path") or ("not written: the run did not succeed" if not ended else "")
        rows.append(f"<tr><td>{_e(name)}</td><td>{_size(size)}</td><td>{_e(where)}</td></tr>")
    head = "<tr><th>output</th><th>size</th><th>written to</th></tr>"
    return f"<h2>Outputs</h2><table>{head}{''.join(rows)}</table>"


def _reused(reused: Mapping[str, str]) -> str:
    """Where a resumed run's replayed steps came from: a link to each earlier run's report
    (``cartridge report RUN`` writes it as ``RUN.html`` beside this one)."""
    if not reused:
        return ""
    by_run: dict[str, list[str]] = {}
    for step, run_id in reused.items():
        by_run.setdefault(run_id, []).append(step)
    items = "".join(
        f'<li><a href="{_e(run_id)}.html">run {_e(run_id)}</a>: {_e(", ".join(sorted(steps)))}</li>'
        for run_id, steps in by_run.items()
    )
    return f"<h2>Reused</h2><p>Steps replayed from the step cache, stored by:</p><ul>{items}</ul>"


def render_report(
    run: RunRecord,
    events: Sequence[Mapping[str, Any]],
    machine_text: str,
    reused: Mapping[str, str] | None = None,
) -> str:
    """The report page of ``run`` (see the module docstring); ``reused`` names, by step, the
    earlier run whose stored call a cache hit replayed."""
    facts = run.facts
    error = facts.get("error")
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(run.started))
    seconds = f"{run.seconds:.3f} s" if run.seconds is not None else "not ended"
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>run {_e(run.id)}</title><style>{_STYLE}</style>",
        f"<script>{_SCRIPT}</script></head><body>",
        f'<h1>Run {_e(run.id)}: <span class="{_e(run.status)}">{_e(run.status)}</span></h1>',
        f'<p class="meta">{_e(run.machine)}, started {_e(started)}, {_e(seconds)}',
        f"{', step cache ' + _e(facts['cache']) if facts.get('cache') else ''}</p>",
        f"<h2>Machine</h2>{_graph_svg(facts.get('graph', {}), _marked(events, error))}",
        f"<details><summary>text</summary><pre>{_e(machine_text)}</pre></details>",
        _inputs(facts),
        _outputs({**facts, "status": run.status}, events),
        f"<h2>Timeline</h2>{_timeline(events, error)}",
        f"<h2>Steps</h2>{_totals(events)}",
        _reused(reused or {}),
    ]
    if error:
        where = f"step {error.get('step')}" if error.get("step") else "the run"
        if error.get("item") is not None:
            where += f", item {error['item']}"
        parts.append(
            f'<h2>Error</h2><p class="failed">{_e(where)}: {_e(error.get("code"))} '
            f"({_e(error.get('class'))}): {_e(error.get('message'))}</p>"
        )
    if run.status == "stale":
        parts.append('<p class="running">The process that ran it is gone (killed outright); '
                     "the run never ended.</p>")  # fmt: skip
    stderr = facts.get("stderr") or {}
    if stderr:
        parts.append("<h2>Cartridges' stderr</h2>")
        for name, tail in stderr.items():
            parts.append(f"<h3>{_e(name)}</h3><pre>{_e(tail)}</pre>")
    parts.append('<pre id="page-errors"></pre>')
    parts.append(f'<script type="application/json" id="run-facts">{_json_in_html(facts)}</script>')
    parts.append("</body></html>")
    return "".join(parts)


def _json_in_html(obj: Any) -> str:
    return json.dumps(obj, default=str).replace("</", "<\\/")
