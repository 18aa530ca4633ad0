"""Graphs that grow while they run (sans-IO): the model, the four operations, the scheduler's
decisions, the JSON document and the tree.

* :class:`GraphModel` — value nodes, cap nodes, aliases (ordered, append-only, frozen copies),
  and the four operations ``add_value_node``, ``instantiate_with_deps``, ``alias`` and
  ``detach_from_alias``, each refused with :class:`GraphRefused` before it changes anything;
* :class:`Schedule` — which node starts when (``get_ready``, ``produced``, ``done``,
  ``failed``, ``is_active``), re-resolved on every change of nodes and aliases;
* :func:`parse_batch` / :func:`apply_batch` — the grow-graph cap's batch, whole or nothing;
* :func:`dump_graph` / :func:`load_graph` — the graph as JSON and back;
* :func:`render_tree` — the graph drawn as a tree; :func:`render_html` — a page of it.

The rules and the wire contract are chapter 17 of the specification (GRW-1 .. GRW-15).
"""

from __future__ import annotations

from ._batch import Batch, GraphOp, OpKind, apply_batch, parse_batch, parse_parent
from ._dump import FORMAT, dump_graph, load_graph
from ._errors import GraphRefused, Refusal
from ._html import render_html
from ._model import Dep, GraphLimits, GraphModel, GraphNode, NodeKind, Snapshot, Source
from ._schedule import NodeState, Schedule
from ._tree import STATE_MARKS, render_tree

#: The cap the engine answers itself for growth from inside a cartridge (GRW-10).
GROW_GRAPH_CAP = 'cap:in="media:graph-ops;json";op=grow-graph;out="media:graph-results;json"'
GRAPH_OPS_MEDIA = "media:graph-ops;json"
GRAPH_RESULTS_MEDIA = "media:graph-results;json"

__all__ = (
    "GROW_GRAPH_CAP",
    "GRAPH_OPS_MEDIA",
    "GRAPH_RESULTS_MEDIA",
    "FORMAT",
    "Batch",
    "Dep",
    "GraphLimits",
    "GraphModel",
    "GraphOp",
    "GraphRefused",
    "GraphNode",
    "NodeKind",
    "NodeState",
    "OpKind",
    "Refusal",
    "Schedule",
    "Snapshot",
    "Source",
    "STATE_MARKS",
    "apply_batch",
    "dump_graph",
    "load_graph",
    "parse_batch",
    "parse_parent",
    "render_html",
    "render_tree",
)
