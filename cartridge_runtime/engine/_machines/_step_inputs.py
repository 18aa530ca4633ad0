"""A step call's inputs from what its feeds give: one input per arg, in the cap's terms.

Each binding becomes one input under the arg's stream URN (MCH-15): a constant as its text's
bytes, an item as its value, a streamed value as a stream of its pieces, a whole value joined
(or as items), several bindings on one arg as one sequence. Byte counts go to the run's
reports, and each input's digest to the call's :class:`CallInputs` (for the step cache).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ...machine import Feed, FeedKind, Step, StepPlan, constant_text
from .._events import Item
from .._inputs import ItemStream, ValueStream
from ._cache_key import digest_of
from ._report import Reports
from ._scope import as_items, item_value
from ._step_call import CallInputs

__all__ = ("step_inputs",)


def step_inputs(
    reports: Reports, sp: StepPlan, given: Sequence[tuple[Feed, Any]], call: CallInputs
) -> list[tuple[str, Any]]:
    """The call's inputs, one per arg, from what each feed gives (MCH-15); ``call`` gets each
    input's digest on the way."""
    step = sp.step
    by_arg: dict[str, list[tuple[Feed, Any]]] = {}
    for feed, value in given:
        by_arg.setdefault(feed.binding.arg, []).append((feed, value))
    inputs: list[tuple[str, Any]] = []
    for arg_name, values in by_arg.items():
        arg = step.definition.arg_named(arg_name)
        assert arg is not None
        if len(values) > 1:
            items: list[Item] = []
            for feed, value in values:
                items += _items_of(feed, value)
            call.known(digest_of, items, True)
            inputs.append((arg.stream_urn, items))
            continue
        feed, value = values[0]
        inputs.append((arg.stream_urn, _input_of(reports, step, feed, value, call)))
    return inputs


def _items_of(feed: Feed, value: Any) -> list[Item]:
    if feed.node is None:
        return [Item(value=value)]
    kind, payload = value
    if kind == "item":
        return [payload if isinstance(payload, Item) else Item(value=payload)]
    return as_items(payload, bool(feed.node.is_sequence or feed.kind is FeedKind.COLLECTED))


def _input_of(reports: Reports, step: Step, feed: Feed, value: Any, call: CallInputs) -> Any:
    if feed.node is None:
        text = value if isinstance(value, str) else constant_text(value)
        call.known(digest_of, [text.encode("utf-8")], False)
        return text.encode("utf-8")
    kind, payload = value
    if kind == "item":
        call.tally.bytes_in += reports.count_in(step, [payload])
        call.known(digest_of, [item_value(payload)], False)
        return item_value(payload)
    sequence = feed.node.is_sequence or feed.kind is FeedKind.COLLECTED
    if kind == "stream":
        call.readers.append(payload)
        counted = reports.counting_in(step, payload.pieces(), call.tally)
        counted = call.streamed(payload.flow, counted, sequence)
        return ItemStream(counted) if sequence else ValueStream(counted)
    call.tally.bytes_in += reports.count_in(step, payload)
    if sequence:
        call.known(digest_of, as_items(payload, True), True)
        return as_items(payload, True)
    call.known(digest_of, payload, False)
    if all(isinstance(p, bytes | bytearray | memoryview) for p in payload):
        return b"".join(payload)
    return ValueStream(_iterate(payload))


async def _iterate(pieces: list[Any]) -> AsyncIterator[Any]:
    for piece in pieces:
        yield piece
