"""The graph room's refusals: one typed error, with the reason as an enum.

An operation that cannot be applied is refused where it is made, before the graph changes;
on the wire the refusal is an ERR with code ``GRAPH_REFUSED`` and class ``input`` (GRW-12).
"""

from __future__ import annotations

import enum
from typing import Any

from ..errors import DefinitionError
from ..protocol import AttributionClass, ErrorCode

__all__ = ("GraphRefused", "Refusal")


class Refusal(enum.StrEnum):
    """Why an operation on a graph was refused."""

    UNKNOWN_NAME = "unknown-name"  #: a name that is neither a node nor an alias
    NAME_TAKEN = "name-taken"  #: an alias name that is already a node's name
    CYCLE = "cycle"  #: the operation would close a cycle
    FROZEN = "frozen"  #: an append to a frozen alias
    LIMIT = "limit"  #: a limit (nodes, value size, batch size) would be passed
    BAD_OP = "bad-op"  #: an operation that is not well formed
    NO_CAP = "no-cap"  #: a cap nobody serves, or not allowed to this graph
    NOT_HERE = "not-here"  #: growth from a call that runs in no graph (or in another one)


class GraphRefused(DefinitionError):
    """An operation on a graph was refused; the graph is unchanged.

    :ivar reason: a :class:`Refusal`.
    :ivar index: the index of the refused operation in its batch (None outside a batch).
    :ivar detail: the reason in words, without the index.
    """

    code = ErrorCode.GRAPH_REFUSED
    attribution_class = AttributionClass.INPUT

    def __init__(self, reason: Refusal, detail: str, index: int | None = None) -> None:
        where = f"op {index}: " if index is not None else ""
        super().__init__(f"{where}{detail}")
        self.reason = Refusal(reason)
        self.detail = detail
        self.index = index

    def at(self, index: int) -> GraphRefused:
        """The same refusal, naming the operation's index in its batch."""
        return GraphRefused(self.reason, self.detail, index)

    def __reduce__(self) -> tuple[Any, ...]:
        return (GraphRefused, (self.reason, self.detail, self.index))
