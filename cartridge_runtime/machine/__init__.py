"""Machine notation: pipelines of caps as text, resolved into an immutable graph (sans-IO).

A *machine* composes caps: ``doc -> extract -> text`` feeds one cap's output into another's
input. :func:`parse_machine` reads the notation of the reference (capdag 1.524.58) and resolves
it against cap definitions (:class:`~cartridge_runtime.manifest.CapDef`): every step's args are
bound, every node typed, every step placed in or out of a per-item map. The :class:`Machine` it
returns writes the reference's canonical text byte for byte (:meth:`Machine.to_notation`),
compares equal to every machine the reference holds equivalent, and draws itself
(:meth:`Machine.to_mermaid`, :meth:`Machine.to_dot`). :class:`MachineBuilder` makes the same
machines from Python. Every refusal is a :class:`MachineError` whose ``kind`` is the reference's
error class name. The rules are in ``protocol_spec/12-machines.md`` (``MCH-n``).

Example::

    machine = parse_machine('''
        words cap:in="media:enc=utf-8";op=words;out="media:enc=utf-8;word"
        upper cap:in="media:enc=utf-8;word";op=upper;out="media:enc=utf-8;word"
        doc -> words -> ws
        ws -> upper -> loud
    ''', caps)
    machine.step("upper").placement.per_item   # True: upper runs once per word
"""

from __future__ import annotations

from ._builder import MachineBuilder
from ._constant import constant_text
from ._errors import *  # noqa: F403
from ._errors import __all__ as _error_names
from ._include import (
    FileMachineSource,
    LoadedMachine,
    MachineSource,
    MachineSourceError,
    MappingMachineSource,
)
from ._media import MediaDef, MediaValidation
from ._model import Binding, Machine, Node, Step, StepPlacement, Strand, TakenOutput
from ._parse import parse_machine
from ._plan import Feed, FeedKind, Plan, ScopePlan, StepPlan, plan_machine, step_runs
from ._syntax import MAX_RETRY, RESERVED_NODE_NAMES, OnError, StepPolicy

__all__ = (
    "parse_machine",
    "Machine",
    "Strand",
    "Step",
    "Node",
    "Binding",
    "TakenOutput",
    "StepPlacement",
    "StepPolicy",
    "OnError",
    "MachineBuilder",
    "MediaDef",
    "MediaValidation",
    "MachineSource",
    "MappingMachineSource",
    "FileMachineSource",
    "LoadedMachine",
    "MachineSourceError",
    "constant_text",
    "Plan",
    "ScopePlan",
    "StepPlan",
    "Feed",
    "FeedKind",
    "plan_machine",
    "step_runs",
    "MAX_RETRY",
    "RESERVED_NODE_NAMES",
    *_error_names,
)
