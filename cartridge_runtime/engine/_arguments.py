"""Inputs checked against a cap definition before anything is sent.

Pure functions of the definition and the inputs' *shapes* (media URN, whether a value is a
sequence): no value is read, and no message names one. A plain call uses
:func:`check_call_inputs`; a machine run checks its input nodes with the same pieces
(:func:`media_problem`, :func:`shape_problem`), so both refuse the same things in the same
words.

A call's input is paired with the first argument its media URN *conforms to* (the stdin
source's URN, the argument's own, or the type it ``accepts``), preferring one it is equivalent
to; a required argument without a default must be given; a list (or an item stream) goes only
to an argument that ``is_sequence``. :func:`plan_call_inputs` then adds the ``default_value`` of
every argument not given, so a handler sees its defaults whoever calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..manifest import ArgDef, CapDef
from ..protocol import AttributionClass, ErrorCode
from ..urn import MediaUrn, UrnError
from ._errors import CallError
from ._inputs import ItemStream

__all__ = (
    "ArgumentError",
    "check_call_inputs",
    "default_inputs",
    "plan_call_inputs",
    "media_problem",
    "shape_problem",
    "is_sequence_value",
)


class ArgumentError(CallError):
    """A call's inputs do not fit the cap's definition; nothing was sent.

    Code ``MISSING_INPUT`` for a required argument that was not given, ``INVALID_INPUT``
    otherwise; class ``input``; ``arg_urn`` is the argument's media URN when one is concerned.

    :ivar arg: the argument's name in the definition (``None`` for an input no argument takes).
    :ivar index: the position of the offending input in the call's list (``None``: missing).
    :ivar reason: what is wrong, without any value.
    """

    def __init__(
        self,
        cap: str,
        reason: str,
        *,
        arg: ArgDef | None = None,
        index: int | None = None,
        missing: bool = False,
    ) -> None:
        where = f"input {index}" if index is not None else "inputs"
        if arg is not None:
            where += f" (arg '{arg.name}')" if index is not None else f": arg '{arg.name}'"
        super().__init__(
            ErrorCode.MISSING_INPUT if missing else ErrorCode.INVALID_INPUT,
            AttributionClass.INPUT,
            f"cap {cap}: {where}: {reason}",
            arg_urn=arg.media_urn if arg is not None else None,
        )
        self.cap = cap
        self.arg = arg.name if arg is not None else None
        self.index = index
        self.reason = reason
        self._args = (cap, reason, arg, index, missing)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, self._args)


def _rebuild(
    cap: str, reason: str, arg: ArgDef | None, index: int | None, missing: bool
) -> ArgumentError:
    return ArgumentError(cap, reason, arg=arg, index=index, missing=missing)


#: What a sequence value is (a tuple, not a union spelled at each call, which makes two
#: union objects a time).
_SEQUENCES = (list, tuple, ItemStream)


def is_sequence_value(value: Any) -> bool:
    """Whether a call input's value is a sequence (a list/tuple of items, an item stream)."""
    return isinstance(value, _SEQUENCES)


def media_problem(media: str, wanted: MediaUrn) -> str | None:
    """Why an input labelled ``media`` cannot stand for ``wanted`` (``None``: it can)."""
    try:
        urn = MediaUrn.parse(media)
    except UrnError as error:
        return f"its media URN does not parse: {error}"
    if not urn.conforms_to(wanted):
        return f"'{media}' does not conform to {wanted}"
    return None


def shape_problem(arg: ArgDef, value: Any, where: str = "") -> str | None:
    """Why ``value``'s shape does not fit ``arg`` (``None``: it does): a sequence given to an
    argument that takes one value. ``where`` adds to the argument's description."""
    if is_sequence_value(value) and not arg.is_sequence:
        return f"a list was given, but arg '{arg.name}'{where} takes one value"
    return None


def _urns(arg: ArgDef) -> list[MediaUrn]:
    out = []
    for text in dict.fromkeys((arg.stream_urn, arg.media_urn, arg.accepts)):
        if text is None:
            continue
        try:
            out.append(MediaUrn.parse(text))
        except UrnError:
            continue
    return out


def _pair(args: Sequence[ArgDef], media: MediaUrn) -> ArgDef | None:
    """The argument an input of type ``media`` is for: equivalent first, then conforming."""
    table = [(arg, _urns(arg)) for arg in args]
    for arg, urns in table:
        if any(media.is_equivalent(u) for u in urns):
            return arg
    for arg, urns in table:
        if any(media.conforms_to(u) for u in urns):
            return arg
    return None


def _given_names(
    cap: str, args: Sequence[ArgDef], inputs: Sequence[tuple[str, Any]], *, strict: bool
) -> set[str]:
    """The names of the arguments ``inputs`` give; ``strict`` refuses an input that does not
    fit (otherwise it is passed over)."""
    given: set[str] = set()
    for index, (media, value) in enumerate(inputs):
        try:
            urn = MediaUrn.parse(media)
        except UrnError as error:
            if not strict:
                continue
            raise ArgumentError(
                cap, f"its media URN does not parse: {error}", index=index
            ) from None
        arg = _pair(args, urn)
        if arg is None:
            if not strict:
                continue
            known = ", ".join(f"'{a.name}' ({a.stream_urn})" for a in args)
            raise ArgumentError(
                cap,
                f"'{media}' conforms to no argument of the cap (its args: {known})",
                index=index,
            )
        problem = shape_problem(arg, value)
        if problem is not None and strict:
            raise ArgumentError(cap, problem, arg=arg, index=index)
        given.add(arg.name)
    return given


def check_call_inputs(cap: str, definition: CapDef, inputs: Sequence[tuple[str, Any]]) -> None:
    """Refuse ``inputs`` that do not fit ``definition`` (a definition declaring no argument
    at all says nothing about its inputs and is not checked).

    :raises ArgumentError: the first problem, naming the argument (or the input's position).
    """
    args = definition.args
    if not args:
        return
    given = _given_names(cap, args, inputs, strict=True)
    for arg in args:
        if arg.required and arg.default_value is None and arg.name not in given:
            if all(u.is_void() for u in _urns(arg)):
                continue
            raise ArgumentError(
                cap, f"required, not given (it takes {arg.stream_urn})", arg=arg, missing=True
            )


def default_inputs(
    definition: CapDef, inputs: Sequence[tuple[str, Any]]
) -> list[tuple[str, bytes]]:
    """The inputs that carry the ``default_value`` of each argument ``inputs`` do not give,
    in declaration order, labelled with the argument's media URN.

    Lenient: an input that fits no argument is passed over, so a caller that sends what it is
    told (the test harness) can still add the defaults.
    """
    args = definition.args
    if not any(arg.default_value is not None for arg in args):
        return []
    given = _given_names(definition.urn, args, inputs, strict=False)
    out: list[tuple[str, bytes]] = []
    for arg in args:
        default = arg.default_bytes
        if default is not None and arg.name not in given:
            out.append((arg.media_urn, default))
    return out


def plan_call_inputs(
    cap: str, definition: CapDef, inputs: Sequence[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """A call's inputs as the cartridge receives them: ``inputs`` checked against
    ``definition``, then the default of every argument they do not give (the one place a
    ``default_value`` is filled in for the engine, machines and ``cartridge call``; CLI mode
    gives the same bytes from :attr:`ArgDef.default_bytes`).

    The plan depends only on the definition and the inputs' shapes, so the defaults a shape
    gets are remembered per definition (a repeated call checks nothing twice); a shape that
    does not fit is checked again each time, so that its error is raised afresh.

    :raises ArgumentError: ``inputs`` do not fit (see :func:`check_call_inputs`).
    """
    if len(inputs) == 1:  # the usual shape, without a comprehension's frame
        media, value = inputs[0]
        shape: tuple[Any, ...] = (cap, (media, isinstance(value, _SEQUENCES)))
    else:
        shape = (cap, *[(media, isinstance(value, _SEQUENCES)) for media, value in inputs])
    seen = _PLANS.get(id(definition))
    if seen is not None and seen[0] is definition:
        defaults = seen[1].get(shape)
        if defaults is not None:
            return [*inputs, *defaults] if defaults else list(inputs)
    check_call_inputs(cap, definition, inputs)
    defaults = tuple(default_inputs(definition, inputs))
    if seen is None or seen[0] is not definition:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        seen = _PLANS[id(definition)] = (definition, {})
    if len(seen[1]) < _PLANS_KEPT:
        seen[1][shape] = defaults
    return [*inputs, *defaults]


#: Definition id -> (the definition, {(cap, (media, is a sequence)...): its defaults}): the
#: plans of shapes that fitted. The definition is kept so that a reused id never matches.
_PLANS: dict[int, tuple[CapDef, dict[tuple[Any, ...], tuple[tuple[str, bytes], ...]]]] = {}
#: At most this many definitions, and shapes per definition, are remembered.
_PLANS_KEPT = 256
