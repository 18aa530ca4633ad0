"""Writing a machine: its canonical notation, and pictures of it (MCH-7).

The canonical text has every cap header first (``edge_N <cap URN>``, in step order), then every
wiring, each binding written under its arg's name and each taken output under its output's
name, so that nothing is left to match by type when the text is read again. Constants are
written by :func:`constant_text`; a policy after the step alias as ``{retry=N, on_error=absent}``.
The per-item map is not written: reading the text derives it again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ._constant import constant_text

__all__ = ("canonical_text", "mermaid_text", "dot_text")


# What writing reads of a machine (the model in ``_model`` has it; these protocols keep this
# module from importing the model that calls it).


class _UrnLike(Protocol):
    @property
    def text(self) -> str: ...


class _Cap(_UrnLike, Protocol):
    @property
    def tags(self) -> Mapping[str, str]: ...


class _Binding(Protocol):
    @property
    def arg(self) -> str: ...
    @property
    def node(self) -> str | None: ...
    @property
    def constant(self) -> Any: ...


class _Output(Protocol):
    @property
    def output(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def optional(self) -> bool: ...


class _Policy(Protocol):
    def to_notation(self) -> str: ...


class _Placement(Protocol):
    @property
    def per_item(self) -> bool: ...


class _Step(Protocol):
    @property
    def alias(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def cap(self) -> _Cap: ...
    @property
    def bindings(self) -> Sequence[_Binding]: ...
    @property
    def outputs(self) -> Sequence[_Output]: ...
    @property
    def policy(self) -> _Policy: ...
    @property
    def placement(self) -> _Placement: ...


class _Node(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def media(self) -> _UrnLike: ...
    @property
    def is_sequence(self) -> bool: ...


class _Strand(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def steps(self) -> Sequence[_Step]: ...
    @property
    def nodes(self) -> Sequence[_Node]: ...


class _Machine(Protocol):
    @property
    def steps(self) -> Sequence[_Step]: ...
    @property
    def nodes(self) -> Sequence[_Node]: ...
    @property
    def strands(self) -> Sequence[_Strand]: ...
    def node(self, name: str) -> _Node: ...


def _wiring(step: _Step) -> str:
    members = ", ".join(
        f"{b.arg}={constant_text(b.constant) if b.node is None else b.node}" for b in step.bindings
    )
    targets = ", ".join(f"{o.output}={o.node}" for o in step.outputs)
    return f"({members}) -> {step.alias}{step.policy.to_notation()} -> ({targets})"


def canonical_text(machine: _Machine, *, bracketed: bool = False) -> str:
    """The canonical notation of ``machine`` (line-based, or bracketed on one line)."""
    steps = machine.steps
    statements = [f"{step.alias} {step.cap.text}" for step in steps]
    statements += [_wiring(step) for step in steps]
    if bracketed:
        return "".join(f"[{statement}]" for statement in statements)
    return "\n".join(statements)


def _caption(step: _Step) -> str:
    name = step.label or step.alias
    op = step.cap.tags.get("op")
    return f"{name}: {op}" if op and op != name else name


def _node_caption(machine: _Machine, name: str) -> str:
    node = machine.node(name)
    shown = node.label or node.name
    return f"{shown}{'[]' if node.is_sequence else ''}\n{node.media.text}"


def mermaid_text(machine: _Machine) -> str:
    """A Mermaid ``flowchart LR``: nodes as rounded boxes, steps as boxes (double-edged when
    they run once per item), arrows labelled with the arg and output names."""
    lines = ["flowchart LR"]
    for node in machine.nodes:
        caption = _node_caption(machine, node.name).replace('"', "#quot;").replace("\n", "<br/>")
        lines.append(f'    {node.name}("{caption}")')
    for step in machine.steps:
        caption = _caption(step).replace('"', "#quot;")
        if step.placement.per_item:
            caption += " (per item)"
        shape = f'[["{caption}"]]' if step.placement.per_item else f'["{caption}"]'
        lines.append(f"    {step.alias}{shape}")
        for binding in step.bindings:
            if binding.node is not None:
                lines.append(f"    {binding.node} -->|{binding.arg}| {step.alias}")
        for output in step.outputs:
            dashed = "-.->" if output.optional else "-->"
            lines.append(f"    {step.alias} {dashed}|{output.output}| {output.node}")
    return "\n".join(lines) + "\n"


def _dot_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def dot_text(machine: _Machine) -> str:
    """A Graphviz ``digraph``: nodes as ellipses, steps as boxes (doubled when per item),
    one cluster per strand; an optional output's arrow is dashed."""
    lines = ["digraph machine {", "    rankdir=LR;", '    node [fontname="Helvetica"];']
    for strand in machine.strands:
        lines.append(f"    subgraph cluster_{strand.index} {{")
        lines.append(f"        label={_dot_string(f'strand {strand.index}')};")
        for node in strand.nodes:
            caption = _dot_string(_node_caption(machine, node.name))
            lines.append(f"        {node.name} [shape=ellipse, label={caption}];")
        for step in strand.steps:
            periphery = 2 if step.placement.per_item else 1
            lines.append(
                f"        {step.alias} [shape=box, peripheries={periphery}, "
                f"label={_dot_string(_caption(step))}];"
            )
        lines.append("    }")
    for step in machine.steps:
        for binding in step.bindings:
            if binding.node is not None:
                lines.append(
                    f"    {binding.node} -> {step.alias} [label={_dot_string(binding.arg)}];"
                )
            else:
                given = _dot_string(f"{step.alias}.{binding.arg}")
                lines.append(
                    f"    {given} [shape=note, label={_dot_string(constant_text(binding.constant))}];"
                )
                lines.append(f"    {given} -> {step.alias} [label={_dot_string(binding.arg)}];")
        for output in step.outputs:
            style = ", style=dashed" if output.optional else ""
            lines.append(
                f"    {step.alias} -> {output.node} [label={_dot_string(output.output)}{style}];"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"
