"""Validation of manifests and cap definitions, with the reference's rule numbers.

Theory of operation: :func:`validate_cap` checks one definition's arguments,
then its outputs, in exactly the order capdag 1.524.58 checks them (MAN-9,
MAN-10), so the first failure reported is the one the reference host
would report, under the same ``RULEn``. Only after the numbered rules pass do
we add our own stricter check that every media URN in the cap parses (the
reference tolerates an unparseable arg URN; an author never wants one).

:func:`validate_pool_declarations` checks a manifest's pool declarations
against its caps; ``validate_manifest`` (beside :class:`Manifest`) runs both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from ..urn import MEDIA_VOID
from ._args import OUTPUT_CARRIES_INPUT, ArgDef, CliFlagSource, PositionSource, StdinSource
from ._cap import CapDef
from ._errors import (
    ManifestParseError,
    ManifestRuleError,
    PoolDeclarationError,
)
from ._parse import join, parse_media_urn
from ._pool_declarations import POOL_ALL, PoolDeclarations

if TYPE_CHECKING:
    from cartridge_runtime.urn import MediaUrn

__all__ = (
    "RESERVED_CLI_FLAGS",
    "is_valid_definition_name",
    "validate_cap",
    "validate_pool_declarations",
)

#: CLI flags an argument may not use (RULE10): the CLI mode's own words.
RESERVED_CLI_FLAGS: Final = frozenset({"manifest", "--help", "--version", "-v", "-h"})

_LETTERS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_REST: Final = _LETTERS | frozenset("0123456789_-")
_RESERVED_NAMES: Final = frozenset({"true", "false", "null"})


def is_valid_definition_name(name: str) -> bool:
    """Whether ``name`` may label an argument or output (RULE17, RULE19):
    ASCII letter or ``_`` first, then letters, digits, ``_`` or ``-``, and
    not one of ``true``, ``false``, ``null``."""
    if not name or name in _RESERVED_NAMES:
        return False
    if name[0] not in _LETTERS and name[0] != "_":
        return False
    return all(char in _NAME_REST for char in name[1:])


def _media_or_none(text: str) -> MediaUrn | None:
    from cartridge_runtime.urn import MediaUrn, UrnError

    try:
        return MediaUrn.parse(text)
    except UrnError:
        return None


class _CapChecker:
    """Holds one cap while its rules run, so each failure names the cap."""

    def __init__(self, cap: CapDef) -> None:
        self.cap = cap
        self.urn = cap.urn
        cap_urn = cap.cap_urn
        self.in_spec: MediaUrn = cap_urn.in_spec
        self.out_spec: MediaUrn = cap_urn.out_spec
        self.void = parse_media_urn(MEDIA_VOID)

    def refuse(self, rule: str, field: str, detail: str) -> ManifestRuleError:
        return ManifestRuleError(rule, detail, cap_urn=self.urn, field=field)

    # -- arguments ----------------------------------------------------------------

    def check_args(self) -> None:
        args = self.cap.args
        seen_urns: set[str] = set()
        for index, arg in enumerate(args):
            if arg.media_urn in seen_urns:
                raise self.refuse(
                    "RULE1",
                    join(join("args", index), "media_urn"),
                    f"duplicate argument media_urn {arg.media_urn!r}",
                )
            seen_urns.add(arg.media_urn)
        for index, arg in enumerate(args):
            if not arg.sources:
                raise self.refuse(
                    "RULE2",
                    join(join("args", index), "sources"),
                    f"argument {arg.media_urn!r} has no source",
                )
        positions: list[tuple[int, str, str]] = []
        flags: list[tuple[str, str, str]] = []
        for index, arg in enumerate(args):
            self._check_sources(index, arg, positions, flags)
        self._check_one_stdin(args)
        self._check_arg_names(args)
        for index, arg in enumerate(args):
            if arg.accepts is not None and arg.has_stdin_source:
                raise self.refuse(
                    "RULE18",
                    join(join("args", index), "accepts"),
                    f"argument {arg.media_urn!r} declares both a stdin source and accepts",
                )
        self._check_main_input(args)
        for index, arg in enumerate(args):
            if arg.streaming and not self._is_main_input(arg):
                raise self.refuse(
                    "RULE14",
                    join(join("args", index), "streaming"),
                    f"argument {arg.media_urn!r} declares streaming=true but is not the main "
                    f"input (no stdin source equivalent to in={str(self.in_spec)!r})",
                )
        seen_positions: set[int] = set()
        for position, field, media_urn in positions:
            if position in seen_positions:
                raise self.refuse(
                    "RULE5", field, f"duplicate position {position} in argument {media_urn!r}"
                )
            seen_positions.add(position)
        for expected, (position, field, _) in enumerate(sorted(positions)):
            if position != expected:
                raise self.refuse(
                    "RULE6",
                    field,
                    f"positions must be 0, 1, 2... without gaps: expected {expected}, "
                    f"found {position}",
                )
        seen_flags: set[str] = set()
        for flag, field, media_urn in flags:
            if flag in seen_flags:
                raise self.refuse(
                    "RULE9", field, f"duplicate cli_flag {flag!r} in argument {media_urn!r}"
                )
            seen_flags.add(flag)

    def _check_sources(
        self,
        index: int,
        arg: ArgDef,
        positions: list[tuple[int, str, str]],
        flags: list[tuple[str, str, str]],
    ) -> None:
        kinds: set[str] = set()
        has_position = has_flag = False
        base = join(join("args", index), "sources")
        for source_index, source in enumerate(arg.sources):
            field = join(base, source_index)
            if source.kind in kinds:
                raise self.refuse(
                    "RULE4",
                    field,
                    f"argument {arg.media_urn!r} lists source type {source.kind!r} twice",
                )
            kinds.add(source.kind)
            if isinstance(source, PositionSource):
                has_position = True
                positions.append((source.index, join(field, "position"), arg.media_urn))
            elif isinstance(source, CliFlagSource):
                has_flag = True
                flags.append((source.flag, join(field, "cli_flag"), arg.media_urn))
                if source.flag in RESERVED_CLI_FLAGS:
                    raise self.refuse(
                        "RULE10",
                        join(field, "cli_flag"),
                        f"argument {arg.media_urn!r} uses the reserved cli_flag {source.flag!r}",
                    )
        if has_position and has_flag:
            raise self.refuse(
                "RULE7",
                base,
                f"argument {arg.media_urn!r} has both a position and a cli_flag source",
            )

    def _check_one_stdin(self, args: Sequence[ArgDef]) -> None:
        stdin_args = [index for index, arg in enumerate(args) if arg.has_stdin_source]
        if len(stdin_args) > 1:
            first, second = stdin_args[0], stdin_args[1]
            raise self.refuse(
                "RULE3",
                join(join("args", second), "sources"),
                f"arguments {args[first].media_urn!r} and {args[second].media_urn!r} both "
                "declare a stdin source; a cap has one main input",
            )

    def _check_arg_names(self, args: Sequence[ArgDef]) -> None:
        seen: dict[str, ArgDef] = {}
        for index, arg in enumerate(args):
            field = join(join("args", index), "name")
            if not arg.name:
                raise self.refuse("RULE17", field, f"argument {arg.media_urn!r} has no name")
            if not is_valid_definition_name(arg.name):
                raise self.refuse("RULE17", field, f"argument name {arg.name!r} is not valid")
            if arg.name in seen:
                raise self.refuse(
                    "RULE17",
                    field,
                    f"arguments {seen[arg.name].media_urn!r} and {arg.media_urn!r} share "
                    f"the name {arg.name!r}",
                )
            seen[arg.name] = arg

    def _is_main_input(self, arg: ArgDef) -> bool:
        for source in arg.sources:
            if isinstance(source, StdinSource):
                parsed = _media_or_none(source.media_urn)
                if parsed is not None and parsed.is_equivalent(self.in_spec):
                    return True
        return False

    def _check_main_input(self, args: Sequence[ArgDef]) -> None:
        stdin_count = sum(
            1 for arg in args for source in arg.sources if isinstance(source, StdinSource)
        )
        if self.in_spec.is_equivalent(self.void):
            if stdin_count:
                raise self.refuse(
                    "RULE15",
                    "urn.in",
                    f"in= is 'media:void' but {stdin_count} argument(s) declare a stdin source",
                )
            return
        if not any(self._is_main_input(arg) for arg in args):
            raise self.refuse(
                "RULE15",
                "args",
                f"in= is {str(self.in_spec)!r} but no argument declares a stdin source "
                "equivalent to it",
            )

    # -- outputs ------------------------------------------------------------------

    def check_outputs(self) -> None:
        outputs = self.cap.outputs
        seen: dict[str, str] = {}
        for index, output in enumerate(outputs):
            field = join(join("outputs", index), "name")
            if not output.name:
                raise self.refuse("RULE19", field, f"output {output.media_urn!r} has no name")
            if not is_valid_definition_name(output.name):
                raise self.refuse("RULE19", field, f"output name {output.name!r} is not valid")
            if output.name in seen:
                raise self.refuse(
                    "RULE19",
                    field,
                    f"outputs {seen[output.name]!r} and {output.media_urn!r} share the name "
                    f"{output.name!r}",
                )
            seen[output.name] = output.media_urn
        identities: list[MediaUrn] = []
        for index, output in enumerate(outputs):
            field = join(join("outputs", index), "media_urn")
            parsed = _media_or_none(output.media_urn)
            if parsed is None:
                raise self.refuse(
                    "RULE20", field, f"output media_urn {output.media_urn!r} is not a media URN"
                )
            if any(other.is_equivalent(parsed) for other in identities):
                raise self.refuse(
                    "RULE20", field, f"duplicate output media_urn {output.media_urn!r}"
                )
            identities.append(parsed)
        if self.out_spec.is_equivalent(self.void):
            if outputs:
                raise self.refuse(
                    "RULE21",
                    "outputs",
                    f"out= is 'media:void' but {len(outputs)} output(s) are declared",
                )
            return
        main = [i for i, identity in enumerate(identities) if identity.is_equivalent(self.out_spec)]
        if len(main) != 1:
            raise self.refuse(
                "RULE21",
                "outputs",
                f"out= is {str(self.out_spec)!r} but {len(main)} outputs are equivalent to it; "
                "exactly one must be",
            )
        in_is_void = self.in_spec.is_equivalent(self.void)
        for index, output in enumerate(outputs):
            if output.carries is None:
                continue
            field = join(join("outputs", index), "carries")
            if index == main[0]:
                raise self.refuse(
                    "RULE22", field, f"the main output {output.media_urn!r} declares carries"
                )
            if in_is_void:
                raise self.refuse(
                    "RULE22",
                    field,
                    f"output {output.media_urn!r} carries the input but the cap takes none",
                )

    # -- our own, after the reference's rules ------------------------------------

    def check_media_urns(self) -> None:
        for index, arg in enumerate(self.cap.args):
            base = join("args", index)
            parse_media_urn(arg.media_urn, field=join(base, "media_urn"), cap_urn=self.urn)
            if arg.accepts is not None:
                parse_media_urn(arg.accepts, field=join(base, "accepts"), cap_urn=self.urn)
            for source_index, source in enumerate(arg.sources):
                if isinstance(source, StdinSource):
                    parse_media_urn(
                        source.media_urn,
                        field=join(join(join(base, "sources"), source_index), "stdin"),
                        cap_urn=self.urn,
                    )


def validate_cap(cap: CapDef) -> None:
    """Hold one cap definition to the rules, arguments then outputs.

    :raises ManifestParseError: the cap has no alias, or a ``carries`` other than ``"input"``.
    :raises ManifestRuleError: a numbered rule fails (``.rule``, ``.cap_urn``, ``.field``).
    :raises ManifestUrnError: an argument's media URN does not parse.
    """
    if not cap.aliases:
        raise ManifestParseError(
            "a cap must declare at least one alias", cap_urn=cap.urn, field="aliases"
        )
    for index, output in enumerate(cap.outputs):
        if output.carries is not None and output.carries != OUTPUT_CARRIES_INPUT:
            raise ManifestParseError(
                f"an output carries its own type or {OUTPUT_CARRIES_INPUT!r}, "
                f"not {output.carries!r}",
                cap_urn=cap.urn,
                field=join(join("outputs", index), "carries"),
            )
    checker = _CapChecker(cap)
    checker.check_args()
    checker.check_outputs()
    checker.check_media_urns()


def _canonical_member(raw: str, declared: Sequence[str], field: str) -> str:
    from cartridge_runtime.urn import CapUrn, UrnError

    try:
        canon = str(CapUrn.parse(raw))
    except UrnError as exc:
        raise PoolDeclarationError(
            f"pool cap reference {raw!r} is not a valid cap URN: {exc}", pool=raw, field=field
        ) from exc
    if canon not in declared:
        raise PoolDeclarationError(
            f"pool cap reference {raw!r} names no cap declared by this manifest",
            pool=raw,
            field=field,
        )
    return canon


def validate_pool_declarations(
    declarations: PoolDeclarations, cap_urns: Iterable[str]
) -> PoolDeclarations:
    """Check pool declarations against the caps they may name and return
    them canonicalized (pools sorted by name, member and key URNs canonical).

    :raises PoolDeclarationError: a pool named ``all`` or parseable as a cap
        URN, an empty pool, an unknown or repeated member, or a capacity key
        naming neither ``all``, a declared pool, nor a declared cap.
    """
    from cartridge_runtime.urn import CapUrn, UrnError

    declared = [str(CapUrn.parse(urn)) for urn in cap_urns]
    pools: dict[str, tuple[str, ...]] = {}
    for name in sorted(declarations.pools):
        field = join(join("pool_declarations", "pools"), name)
        if name == POOL_ALL:
            raise PoolDeclarationError(
                f"pool name {POOL_ALL!r} is reserved for the implicit all-caps pool",
                pool=name,
                field=field,
            )
        try:
            CapUrn.parse(name)
        except UrnError:
            pass
        else:
            raise PoolDeclarationError(
                f"pool name {name!r} parses as a cap URN; cap URNs name the implicit "
                "singleton pools",
                pool=name,
                field=field,
            )
        members = declarations.pools[name]
        if not members:
            raise PoolDeclarationError(
                f"pool {name!r} declares no member caps", pool=name, field=field
            )
        canon_members: list[str] = []
        for index, member in enumerate(members):
            canon = _canonical_member(member, declared, join(field, index))
            if canon in canon_members:
                raise PoolDeclarationError(
                    f"pool {name!r} lists cap {canon!r} more than once",
                    pool=name,
                    field=join(field, index),
                )
            canon_members.append(canon)
        pools[name] = tuple(canon_members)
    capacities: dict[str, int] = {}
    for key in sorted(declarations.capacities):
        field = join(join("pool_declarations", "capacities"), key)
        if key == POOL_ALL or key in pools:
            canon_key = key
        else:
            try:
                canon_key = _canonical_member(key, declared, field)
            except PoolDeclarationError as exc:
                raise PoolDeclarationError(
                    f"capacity key {key!r} is neither {POOL_ALL!r}, a declared pool, nor a "
                    f"declared cap ({exc.detail})",
                    pool=key,
                    field=field,
                ) from exc
        if canon_key in capacities:
            raise PoolDeclarationError(
                f"capacity for pool {canon_key!r} is declared more than once",
                pool=key,
                field=field,
            )
        capacities[canon_key] = declarations.capacities[key]
    return PoolDeclarations(pools=pools, capacities=capacities)
