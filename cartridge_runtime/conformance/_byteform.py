"""The byte-form SHOULD rules (FRM-17, FRM-18, FRM-19) judged on one received frame body.

The reference encoder is deterministic, so a conformant body is exactly what our own
encoder writes for the decoded frame (meta maps keep the order they arrived in, so FRM-19 is
judged separately against the per-type key order of the spec's table). A difference is
filed under the rule that explains it: key order, a null or extra key (FRM-17); the encoding
of an item, i.e. a longer integer head, a short float or an indefinite length (FRM-18).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import cbor2

from ..protocol import Frame, FrameType, encode_body, frame_to_map

__all__ = ("META_ORDER", "byte_form_findings", "meta_order_problem")

#: FRM-19: the fixed meta key order per frame type (keys not listed may appear anywhere).
META_ORDER: dict[str, tuple[str, ...]] = {
    "HELLO": (
        "max_frame", "max_chunk", "max_reorder_buffer", "initial_credit", "version",
        "manifest", "pools",
    ),
    "END": ("exit_code", "progress", "message"),
    "ERR": ("code", "attribution_class", "message", "arg_urn"),
    "LOG": ("level", "attribution_class", "message", "arg_urn"),
    "LOG-progress": ("level", "message", "progress"),
    "HEARTBEAT": ("drops_total", "stragglers_total", "overruns_total", "pools"),
    "CANCEL": ("code", "attribution_class", "message"),
    "CREDIT": ("credit_dir",),
}  # fmt: skip


def meta_order_problem(frame: Frame) -> str | None:
    """Why ``frame``'s meta keys break FRM-19's order, or None."""
    meta = frame.meta
    if not meta:
        return None
    name = frame.frame_type.name
    if frame.frame_type is FrameType.LOG and meta.get("level") == "progress":
        name = "LOG-progress"
    order = META_ORDER.get(name)
    if order is None:
        return None
    rank = {k: i for i, k in enumerate(order)}
    keys = [k for k in meta if k in rank]
    if keys == sorted(keys, key=rank.__getitem__):
        return None
    want = [k for k in order if k in keys]
    return f"meta keys {keys} (want {want})"


def _raw_map(body: bytes) -> dict[Any, Any] | None:
    fp = io.BytesIO(body)
    try:
        m = cbor2.CBORDecoder(fp).decode()
    except Exception:
        return None
    return m if isinstance(m, dict) and fp.tell() == len(body) else None


def _first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    for lo in range(0, n, 64):  # compare in slices, not byte by byte
        if a[lo : lo + 64] != b[lo : lo + 64]:
            for i in range(lo, min(lo + 64, n)):
                if a[i] != b[i]:
                    return i
    return n


def byte_form_findings(frame: Frame, body: bytes) -> tuple[tuple[str, str], ...]:
    """``(rule, detail)`` for every byte-form rule the body of ``frame`` breaks."""
    out: list[tuple[str, str]] = []
    problem = meta_order_problem(frame)
    if problem:
        out.append(("FRM-19", problem))
    try:
        ours = encode_body(frame)
    except Exception:  # a frame our encoder refuses is the decode audit's business
        return tuple(out)
    if ours == body:
        return tuple(out)
    raw = _raw_map(body)
    if raw is None:
        return tuple(out)
    keys = list(raw)
    want_keys = list(frame_to_map(frame))
    if keys != sorted(keys, key=lambda k: (not isinstance(k, int), k if isinstance(k, int) else 0)):
        out.append(("FRM-17", f"map keys in order {keys} (want ascending)"))
    elif any(v is None for v in raw.values()):
        nulls = [k for k, v in raw.items() if v is None]
        out.append(("FRM-17", f"key(s) {nulls} written as null (leave absent fields out)"))
    elif set(keys) != set(want_keys):
        out.append(("FRM-17", f"keys {keys} (canonical form has {want_keys})"))
    elif _items_differ(raw, body):
        at = _first_difference(ours, body)
        out.append(
            (
                "FRM-18",
                f"item encoding differs from the canonical form at byte {at} "
                f"(got {body[at : at + 9].hex()}, want {ours[at : at + 9].hex()})",
            )
        )
    return tuple(out)


def _items_differ(raw: Mapping[Any, Any], body: bytes) -> bool:
    """True when re-encoding the decoded map in its own key order (shortest integer heads,
    8-byte floats, definite lengths) does not give the body back."""
    try:
        return bool(cbor2.dumps(raw) != body)
    except Exception:
        return True
