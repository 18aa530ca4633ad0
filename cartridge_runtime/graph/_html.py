"""A graph as one self-contained HTML page: the grown graph drawn, its nodes, its operations.

The drawing is inline SVG: nodes in columns by depth (a node one column right of the deepest
node it reads), boxes coloured by state, an edge per source read; then the tree (as
:func:`render_tree` writes it), a table of nodes (state, cap or media, who made it, why it
failed or was skipped) and, when given, the log of operations and node events. No script, no
network: the page opens anywhere.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ._model import GraphModel, NodeKind
from ._schedule import NodeState
from ._tree import render_tree

__all__ = ("render_html",)

_COLOURS: Final = {
    NodeState.DONE: "#d4f4d2",
    NodeState.FAILED: "#f8c9c4",
    NodeState.SKIPPED: "#e8e8e8",
    NodeState.WAITING: "#ffffff",
    NodeState.RUNNING: "#fff1b8",
    NodeState.STREAMING: "#fff1b8",
}
_W: Final = 170
_H: Final = 38
_GAP_X: Final = 60
_GAP_Y: Final = 16


def _depths(model: GraphModel) -> dict[str, int]:
    depth: dict[str, int] = {}
    for name in model.nodes:  # nodes only read nodes made before them
        inputs = model.inputs_of(name)
        depth[name] = 1 + max((depth.get(i, 0) for i in inputs), default=-1)
    return depth


def _svg(model: GraphModel, state_of: Callable[[str], NodeState]) -> str:
    depth = _depths(model)
    columns: dict[int, list[str]] = {}
    for name in model.nodes:
        columns.setdefault(depth[name], []).append(name)
    where: dict[str, tuple[int, int]] = {}
    for col, names in columns.items():
        for row, name in enumerate(names):
            where[name] = (20 + col * (_W + _GAP_X), 20 + row * (_H + _GAP_Y))
    width = 40 + (max(columns, default=0) + 1) * (_W + _GAP_X)
    height = 40 + max((len(v) for v in columns.values()), default=1) * (_H + _GAP_Y)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">'
    ]
    for name in model.nodes:
        x2, y2 = where[name]
        for source in model.inputs_of(name):
            x1, y1 = where[source]
            parts.append(
                f'<line x1="{x1 + _W}" y1="{y1 + _H // 2}" x2="{x2}" y2="{y2 + _H // 2}" '
                'stroke="#888" stroke-width="1"/>'
            )
    for name, node in model.nodes.items():
        x, y = where[name]
        state = state_of(name)
        what = node.explain or (node.media if node.kind is NodeKind.VALUE else node.cap) or ""
        parts.append(
            f"<g><title>{html.escape(name)}: {html.escape(state.value)} "
            f"{html.escape(node.cap or node.media or '')}</title>"
            f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="5" '
            f'fill="{_COLOURS[state]}" stroke="#555"/>'
            f'<text x="{x + 6}" y="{y + 15}" font-weight="bold">{html.escape(name)}</text>'
            f'<text x="{x + 6}" y="{y + 30}">{html.escape(what[:28])}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(
    model: GraphModel,
    state_of: Callable[[str], NodeState],
    *,
    reasons: Mapping[str, str] | None = None,
    log: Sequence[Mapping[str, Any]] = (),
    title: str = "graph",
) -> str:
    """The page (see the module docstring)."""
    reasons = reasons or {}
    rows = []
    for name, node in model.nodes.items():
        state = state_of(name)
        what = node.cap if node.kind is NodeKind.CAP else node.media
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(cell))}</td>"
                for cell in (
                    name,
                    state.value,
                    what or "",
                    node.explain or "",
                    node.made_by or "",
                    reasons.get(name, ""),
                )
            )
            + "</tr>"
        )
    aliases = "".join(
        f"<li><b>{html.escape(a)}</b>{' (frozen)' if model.is_frozen(a) else ''}: "
        f"{html.escape(', '.join(m))}</li>"
        for a, m in model.aliases.items()
    )
    events = "".join(
        f"<li><code>{html.escape(json.dumps(dict(e), ensure_ascii=False))}</code></li>" for e in log
    )
    counts: dict[str, int] = {}
    for name in model.nodes:
        counts[state_of(name).value] = counts.get(state_of(name).value, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    tree = render_tree(model, model.sinks(), state_of, dict(reasons))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}"
        "pre{background:#f6f6f6;padding:8px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{len(model.nodes)} nodes: {html.escape(summary)}</p>"
        f"<h2>The graph</h2>{_svg(model, state_of)}"
        f"<h2>Tree</h2><pre>{html.escape(tree)}</pre>"
        "<h2>Nodes</h2><table><tr><th>node</th><th>state</th><th>cap or media</th>"
        f"<th>explain</th><th>made by</th><th>reason</th></tr>{''.join(rows)}</table>"
        f"<h2>Aliases</h2><ul>{aliases}</ul>"
        + (f"<h2>Operations and events</h2><ol>{events}</ol>" if events else "")
        + "</body></html>"
    )
