"""A graph drawn as a tree from a node, for people (after DAG-53).

Children are what a node reads now, alias members in place: the cap's main argument (its
``in`` media) first, then each other argument under an ``(arg: NAME)`` line; a named output is
shown as ``.output``. Each line shows the node's state, a value's media URN and the explain
text; a node drawn
before is shown once more as ``(above)`` without its children.
"""

from __future__ import annotations

from collections.abc import Callable

from ..urn import CapUrn, MediaUrn, UrnError
from ._model import Dep, GraphModel, NodeKind
from ._schedule import NodeState

__all__ = ("render_tree", "STATE_MARKS")

STATE_MARKS = {
    NodeState.DONE: "✓ done",
    NodeState.RUNNING: "⚡ running",
    NodeState.STREAMING: "⚡ streaming",
    NodeState.WAITING: "⋯ waiting",
    NodeState.FAILED: "✗ failed",
    NodeState.SKIPPED: "⊘ skipped",
}


def _is_main(cap: str | None, dep: Dep) -> bool:
    if cap is None:
        return False
    try:
        in_spec = CapUrn.parse(cap).in_spec
        return MediaUrn.parse(dep.arg).is_equivalent(MediaUrn.parse(str(in_spec)))
    except (UrnError, TypeError, ValueError):
        return False


def render_tree(
    model: GraphModel,
    roots: list[str],
    state_of: Callable[[str], NodeState],
    reasons: dict[str, str] | None = None,
) -> str:
    """The lines of the tree below each of ``roots``, joined."""
    lines: list[str] = []
    shown: set[str] = set()

    def label(name: str, output: str | None) -> str:
        node = model.nodes[name]
        text = name if output is None else f"{name}.{output}"
        what = "" if node.kind is NodeKind.CAP else f" {node.media}"
        mark = STATE_MARKS[state_of(name)]
        extra = f" ({node.explain})" if node.explain else ""
        why = (reasons or {}).get(name)
        why_text = (
            f": {why}" if why and state_of(name) in (NodeState.FAILED, NodeState.SKIPPED) else ""
        )
        return f"{text} [{mark}{why_text}]{what}{extra}"

    def walk(
        name: str, output: str | None, prefix: str, last: bool, top: bool, path: frozenset[str]
    ) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        if name in path:
            lines.append(f"{prefix}{branch}{name} (cycle)")
            return
        if name in shown:
            lines.append(f"{prefix}{branch}{name}{'' if output is None else '.' + output} (above)")
            return
        shown.add(name)
        lines.append(prefix + branch + label(name, output))
        node = model.nodes[name]
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        entries: list[tuple[str | None, str, str | None]] = []
        deps = sorted(node.deps, key=lambda d: not _is_main(node.cap, d))
        for dep in deps:
            pairs = model.expand(dep)
            tag = None if _is_main(node.cap, dep) else dep.arg
            for src, out in pairs:
                entries.append((tag, src, out))
        # group: main children first, then one "(arg: X)" line per other argument
        groups: list[tuple[str | None, list[tuple[str, str | None]]]] = []
        for tag, src, out in entries:
            if groups and groups[-1][0] == tag:
                groups[-1][1].append((src, out))
            else:
                groups.append((tag, [(src, out)]))
        items: list[tuple[str | None, list[tuple[str, str | None]]]] = []
        for tag, members in groups:
            if tag is None:
                items.extend((None, [m]) for m in members)
            else:
                items.append((tag, members))
        for i, (tag, members) in enumerate(items):
            is_last = i == len(items) - 1
            if tag is None:
                src, out = members[0]
                walk(src, out, child_prefix, is_last, False, path | {name})
            else:
                lines.append(f"{child_prefix}{'└── ' if is_last else '├── '}(arg: {tag})")
                sub = child_prefix + ("    " if is_last else "│   ")
                for j, (src, out) in enumerate(members):
                    walk(src, out, sub, j == len(members) - 1, False, path | {name})

    for root in roots:
        walk(root, None, "", True, True, frozenset())
    return "\n".join(lines)
