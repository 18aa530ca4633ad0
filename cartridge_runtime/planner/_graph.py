"""The cap graph: the edges a list of caps offers the search (PLAN-1 .. PLAN-7).

Rules first:

1. The graph is a list of edges in cap order; a cap gives its main edge first, then one edge
   per other output in declaration order. Nothing but the caps takes part, and a cap whose
   metadata marks it not for planning (``plannable: "false"``, PLAN-24) gives no edge.
2. An edge applies at a position when the position's media URN conforms to the cap's ``in=``;
   after the step the position is the type the edge declares.
3. At a sequence position only sequence-input edges apply directly; a ForEach is offered after
   them when a one-value edge would apply.

The lists of edges that apply at a media URN are computed once per graph and kept, so a graph
built once answers many queries quickly; the graph never changes after it is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.urn import IDENTITY_CAP, MEDIA_VOID, CapUrn, MediaUrn, UrnError

from ._errors import InvalidInputError

__all__ = ("CapGraph", "Edge", "FOR_EACH", "Move")

#: The edge index that stands for a ForEach step in a :data:`Move`.
FOR_EACH: Final = -1

#: One way out of a position: the edge index (or :data:`FOR_EACH`) and the cardinality after.
Move = tuple[int, bool]

_IDENTITY: Final = CapUrn.parse(IDENTITY_CAP)
_VOID: Final = MediaUrn.parse(MEDIA_VOID)


@attrs.frozen(kw_only=True)
class Edge:
    """One way a cap moves a position on: from its ``in=`` to one of its outputs (PLAN-3).

    :ivar index: the edge's place in the graph's edge list (exploration order, PLAN-7).
    :ivar cap: the cap definition.
    :ivar cap_urn: its parsed URN (its specificity ranks plans, PLAN-14).
    :ivar source: the cap's ``in=``: where the edge applies.
    :ivar target: the type of the output taken: where the edge leads.
    :ivar input_is_sequence: whether the main input takes a sequence.
    :ivar output_is_sequence: whether the output taken is a sequence.
    :ivar arg_name: the main input argument's name; ``None`` for a generator (``in=media:void``).
    :ivar output_name: the name of the output taken.
    :ivar other_output: ``None`` for the main output, else the other output's media URN.
    """

    index: int
    cap: CapDef = attrs.field(repr=False)
    cap_urn: CapUrn
    source: MediaUrn
    target: MediaUrn
    input_is_sequence: bool
    output_is_sequence: bool
    arg_name: str | None
    output_name: str
    other_output: MediaUrn | None


def _parse_output(cap: CapDef, text: str) -> MediaUrn:
    try:
        return MediaUrn.parse(text)
    except UrnError as error:
        raise InvalidInputError(
            f"cap {cap.urn}: output media URN {text!r} does not parse: {error}"
        ) from None


def _edges_of(cap: CapDef, start: int) -> list[Edge]:
    """The edges ``cap`` adds, numbered from ``start`` (PLAN-2 .. PLAN-4).

    :raises InvalidInputError: the cap takes data but no argument is its main input.
    """
    urn = cap.cap_urn
    if urn.is_equivalent(_IDENTITY) or urn.out_spec.is_void():
        return []
    source = urn.in_spec
    arg_name: str | None = None
    input_is_sequence = False
    if not source.is_equivalent(_VOID):
        main_input = cap.main_input()
        if main_input is None:
            raise InvalidInputError(
                f"cap {cap.urn} takes {source} but declares no main input "
                "(an argument with a stdin source equivalent to in=)"
            )
        arg_name = main_input.name
        input_is_sequence = main_input.is_sequence
    main = cap.main_output()
    edges = [
        Edge(
            index=start,
            cap=cap,
            cap_urn=urn,
            source=source,
            target=urn.out_spec,
            input_is_sequence=input_is_sequence,
            output_is_sequence=main.is_sequence if main is not None else False,
            arg_name=arg_name,
            output_name=main.name if main is not None else "",
            other_output=None,
        )
    ]
    for output in cap.outputs:
        # The reference skips outputs whose text equals the main output's, not equivalent ones.
        if output.carries is not None or (main is not None and output.media_urn == main.media_urn):
            continue
        media = _parse_output(cap, output.media_urn)
        edges.append(
            Edge(
                index=start + len(edges),
                cap=cap,
                cap_urn=urn,
                source=source,
                target=media,
                input_is_sequence=input_is_sequence,
                output_is_sequence=output.is_sequence,
                arg_name=arg_name,
                output_name=output.name,
                other_output=media,
            )
        )
    return edges


class CapGraph:
    """The edges of a list of caps, ready for many queries (PLAN-1).

    Build it once with :meth:`from_caps` and pass it to :func:`find_paths`,
    :func:`reachable_targets` or :func:`iter_paths` in place of the caps: the lookups it
    learns while answering are kept for the next query. It never changes after it is built.
    """

    __slots__ = ("_applicable", "_by_source", "_edges", "_media", "_moves")

    def __init__(self, edges: Iterable[Edge]) -> None:
        self._edges: tuple[Edge, ...] = tuple(edges)
        self._media: dict[str, MediaUrn] = {}
        # Many caps share an in=: conformance is checked once per distinct one.
        self._by_source: dict[str, tuple[MediaUrn, list[int]]] = {}
        for edge in self._edges:
            self._media.setdefault(edge.target.text, edge.target)
            self._by_source.setdefault(edge.source.text, (edge.source, []))[1].append(edge.index)
        self._applicable: dict[str, tuple[int, ...]] = {}
        self._moves: dict[tuple[str, bool], tuple[Move, ...]] = {}

    @classmethod
    def from_caps(cls, caps: CapGraph | Manifest | Iterable[CapDef]) -> CapGraph:
        """The graph of ``caps`` (a manifest stands for all its caps, in manifest order).
        A cap marked not for planning (:attr:`CapDef.plannable` false) is left out (PLAN-24).

        :raises InvalidInputError: a cap takes data but declares no main input, or one of
            its outputs has a media URN that does not parse.
        """
        if isinstance(caps, CapGraph):
            return caps
        if isinstance(caps, Manifest):
            caps = caps.all_caps()
        edges: list[Edge] = []
        for cap in caps:
            if not isinstance(cap, CapDef):
                raise InvalidInputError(
                    f"caps must be CapDef values (a manifest's caps), not {type(cap).__name__}"
                )
            if not cap.plannable:
                continue
            edges.extend(_edges_of(cap, len(edges)))
        return cls(edges)

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge, in exploration order."""
        return self._edges

    def media(self, text: str) -> MediaUrn:
        """The media URN of canonical ``text`` (a target of some edge, or one learnt)."""
        return self._media[text]

    def learn(self, media: MediaUrn) -> None:
        """Make ``media`` (a query's source) known by its text."""
        self._media.setdefault(media.text, media)

    def _applicable_at(self, text: str) -> tuple[int, ...]:
        found = self._applicable.get(text)
        if found is None:
            media = self._media[text]
            found = tuple(
                sorted(
                    index
                    for source, indexes in self._by_source.values()
                    if media.conforms_to(source)
                    for index in indexes
                )
            )
            self._applicable[text] = found
        return found

    def moves(self, text: str, is_sequence: bool) -> tuple[Move, ...]:
        """The ways out of the position (``text``, ``is_sequence``), in exploration order,
        a ForEach last when one is offered (PLAN-5 .. PLAN-7)."""
        key = (text, is_sequence)
        found = self._moves.get(key)
        if found is not None:
            return found
        moves: list[Move] = []
        for_each = False
        for index in self._applicable_at(text):
            edge = self._edges[index]
            if is_sequence and not edge.input_is_sequence:
                for_each = True
                continue
            moves.append((index, edge.output_is_sequence))
        if for_each:
            moves.append((FOR_EACH, False))
        found = tuple(moves)
        self._moves[key] = found
        return found
