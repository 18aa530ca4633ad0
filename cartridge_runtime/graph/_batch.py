"""A batch of graph operations as the grow-graph cap carries it, applied whole or not at all.

The batch is ``{"ops": [...], "parent": RID?}`` (GRW-10); each op is an object with an ``op``
word. A string ``"$K"`` where a name goes (a dependency, ``node``, ``alias``) stands for the
result of op ``K`` of the same batch. :func:`parse_batch` checks the shape; :func:`apply_batch`
applies the ops in order on a model and, at the first refusal, puts the model back as it was
and raises the refusal naming the op's index.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ._errors import GraphRefused, Refusal
from ._model import GraphModel

__all__ = ("GraphOp", "OpKind", "Batch", "parse_batch", "apply_batch", "parse_parent")


class OpKind(enum.StrEnum):
    ADD_VALUE_NODE = "add_value_node"
    INSTANTIATE_WITH_DEPS = "instantiate_with_deps"
    ALIAS = "alias"
    DETACH_FROM_ALIAS = "detach_from_alias"
    #: Our extension (GRW-16): let later nodes call a catalogue cartridge's caps.
    ACTIVATE = "activate"


@attrs.frozen
class GraphOp:
    """One operation of a batch, its fields checked for shape (names are resolved later)."""

    kind: OpKind
    value: bytes | None = attrs.field(default=None, repr=False)
    media: str | None = None
    cap: str | None = None
    deps: Mapping[str, str | tuple[str, ...]] = attrs.field(factory=dict)
    alias: str | None = None
    node: str | None = None
    explain: str | None = None
    cartridge: str | None = None


@attrs.frozen
class Batch:
    ops: tuple[GraphOp, ...]
    parent: str | int | None = None  #: the request id named by ``"parent"``


def _text(op: Mapping[str, Any], key: str, index: int, *, optional: bool = False) -> str | None:
    value = op.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise GraphRefused(Refusal.BAD_OP, f"'{key}' must be a non-empty string", index)
    return value


def parse_parent(raw: Any) -> str | int | None:
    """A ``"parent"`` field: 32 lowercase hex digits (a 16-byte id) or a non-negative integer.

    :raises GraphRefused: anything else.
    """
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise GraphRefused(Refusal.BAD_OP, "'parent' is a request id")
    if isinstance(raw, int) and raw >= 0:
        return raw
    if isinstance(raw, str) and len(raw) == 32 and all(c in "0123456789abcdef" for c in raw):
        return raw
    raise GraphRefused(
        Refusal.BAD_OP, "'parent' is 32 lowercase hex digits or a non-negative integer"
    )


def parse_batch(data: bytes | str | Mapping[str, Any], limit: int = 1_000) -> Batch:
    """The batch ``data`` holds.

    :raises GraphRefused: not JSON, not ``{"ops": [...]}``, too many ops, or an op that is
        not well formed (naming its index).
    """
    doc: Any = data
    if isinstance(data, (bytes, str)):
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise GraphRefused(Refusal.BAD_OP, f"the batch is not JSON: {exc}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("ops"), list):
        raise GraphRefused(Refusal.BAD_OP, 'a batch is {"ops": [...]}')
    raw_ops = doc["ops"]
    if len(raw_ops) > limit:
        raise GraphRefused(Refusal.LIMIT, f"a batch holds at most {limit} ops, not {len(raw_ops)}")
    ops = tuple(_parse_op(raw, i) for i, raw in enumerate(raw_ops))
    return Batch(ops, parse_parent(doc.get("parent")))


def _parse_op(raw: Any, i: int) -> GraphOp:
    if not isinstance(raw, Mapping):
        raise GraphRefused(Refusal.BAD_OP, "an op is an object", i)
    word = raw.get("op")
    try:
        kind = OpKind(str(word))
    except ValueError:
        raise GraphRefused(Refusal.BAD_OP, f"unknown op {word!r}", i) from None
    explain = raw.get("explain")
    if explain is not None and not isinstance(explain, str):
        raise GraphRefused(Refusal.BAD_OP, "'explain' must be a string", i)
    if kind is OpKind.ADD_VALUE_NODE:
        if ("value" in raw) == ("value_b64" in raw):
            raise GraphRefused(Refusal.BAD_OP, "give exactly one of 'value' and 'value_b64'", i)
        if "value" in raw:
            if not isinstance(raw["value"], str):
                raise GraphRefused(Refusal.BAD_OP, "'value' must be a string", i)
            value = raw["value"].encode("utf-8")
        else:
            try:
                value = base64.b64decode(str(raw["value_b64"]), validate=True)
            except (binascii.Error, ValueError):
                raise GraphRefused(Refusal.BAD_OP, "'value_b64' is not base64", i) from None
        return GraphOp(kind, value=value, media=_text(raw, "media", i), explain=explain)
    if kind is OpKind.INSTANTIATE_WITH_DEPS:
        deps_raw = raw.get("deps", {})
        if deps_raw is None:
            deps_raw = {}
        if not isinstance(deps_raw, Mapping):
            raise GraphRefused(Refusal.BAD_OP, "'deps' must be an object", i)
        deps: dict[str, str | tuple[str, ...]] = {}
        for arg, ref in deps_raw.items():
            if isinstance(ref, str):
                deps[arg] = ref
            elif isinstance(ref, list) and all(isinstance(r, str) for r in ref):
                deps[arg] = tuple(ref)
            else:
                raise GraphRefused(
                    Refusal.BAD_OP, f"dependency {arg!r} is a name or a list of names", i
                )
        return GraphOp(kind, cap=_text(raw, "cap", i), deps=deps, explain=explain)
    if kind is OpKind.ALIAS:
        return GraphOp(
            kind, alias=_text(raw, "alias", i), node=_text(raw, "node", i, optional=True)
        )
    if kind is OpKind.ACTIVATE:
        return GraphOp(kind, cartridge=_text(raw, "cartridge", i))
    return GraphOp(kind, alias=_text(raw, "alias", i))


def _ref(name: str | None, results: Sequence[str | None], i: int) -> str | None:
    if name is None or not name.startswith("$") or not name[1:].isdigit():
        return name
    k = int(name[1:])
    if k >= i:
        raise GraphRefused(Refusal.BAD_OP, f"{name!r} names op {k}, which is not before it", i)
    result = results[k]
    if result is None:
        raise GraphRefused(Refusal.BAD_OP, f"{name!r}: op {k} has no result", i)
    return result


def apply_batch(
    model: GraphModel,
    batch: Batch | Sequence[GraphOp],
    *,
    made_by: str | None = None,
    check_cap: Callable[[str], None] | None = None,
    activate: Callable[[str], object] | None = None,
) -> list[str | None]:
    """Apply every op in order; the result of each (a node or alias name).

    :param check_cap: called with each cap an op instantiates; raises :class:`GraphRefused`
        (``Refusal.NO_CAP``) for one this graph may not call.
    :param activate: called with the cartridge an ``activate`` op names; raises
        :class:`GraphRefused` when it is not offered or not approved (none: every ``activate``
        is refused). Undoing a refused batch's activations is the caller's.
    :raises GraphRefused: the first op refused, naming its index; the model is unchanged.
    """
    ops = batch.ops if isinstance(batch, Batch) else tuple(batch)
    if len(ops) > model.limits.max_ops_per_batch:
        raise GraphRefused(
            Refusal.LIMIT, f"a batch holds at most {model.limits.max_ops_per_batch} ops"
        )
    snap = model.snapshot()
    results: list[str | None] = []
    try:
        for i, op in enumerate(ops):
            try:
                if op.kind is OpKind.ACTIVATE:
                    assert op.cartridge is not None
                    if activate is None:
                        raise GraphRefused(Refusal.NO_CAP, "this graph has no catalogue", i)
                    activate(op.cartridge)
                    results.append(op.cartridge)
                    continue
                results.append(_apply(model, op, results, i, made_by, check_cap))
            except GraphRefused as exc:
                raise (exc if exc.index is not None else exc.at(i)) from None
    except BaseException:
        model.restore(snap)
        raise
    return results


def _apply(
    model: GraphModel,
    op: GraphOp,
    results: Sequence[str | None],
    i: int,
    made_by: str | None,
    check_cap: Callable[[str], None] | None,
) -> str | None:
    if op.kind is OpKind.ADD_VALUE_NODE:
        assert op.value is not None and op.media is not None
        return model.add_value_node(op.value, media=op.media, explain=op.explain, made_by=made_by)
    if op.kind is OpKind.INSTANTIATE_WITH_DEPS:
        assert op.cap is not None
        if check_cap is not None:
            check_cap(op.cap)
        deps: dict[str, str | list[str]] = {}
        for arg, ref in op.deps.items():
            if isinstance(ref, str):
                deps[arg] = _ref(ref, results, i) or ref
            else:
                deps[arg] = [_ref(r, results, i) or r for r in ref]
        return model.instantiate_with_deps(op.cap, deps, explain=op.explain, made_by=made_by)
    alias = _ref(op.alias, results, i)
    assert alias is not None
    if op.kind is OpKind.ALIAS:
        return model.alias(alias, _ref(op.node, results, i))
    return model.detach_from_alias(alias)
