"""Typed errors of the manifest layer.

A manifest that is wrong is bad *input* (an author's mistake or a peer's bad
advertisement), not a wire error, so the root :class:`ManifestError` is a
:class:`ValueError` outside the package's error tree
(``protocol.CartridgeRuntimeError``); the runtime or engine turns it into the
proper ERR frame or spawn failure. (:class:`UnknownPoolError` names the ERR
code the runtime answers with.)

Every error carries where it happened: ``cap_urn`` (the cap concerned, when
there is one) and ``field`` (a JSON-style path such as ``args[1].sources[0]``,
relative to the cap when ``cap_urn`` is set, else to the manifest root).
"""

from __future__ import annotations

from .._report import ErrorCode
from ..errors import DefinitionError

__all__ = (
    "ManifestError",
    "ManifestParseError",
    "ManifestRuleError",
    "ManifestUrnError",
    "MissingIdentityCapError",
    "PoolDeclarationError",
    "UnknownPoolError",
)


class ManifestError(DefinitionError):
    """Root of every manifest error.

    :ivar cap_urn: the cap concerned, or ``None`` for manifest-level problems.
    :ivar field: path of the offending field, or ``None``.
    :ivar detail: the bare explanation, without the location prefix.
    """

    def __init__(
        self, detail: str, *, cap_urn: str | None = None, field: str | None = None
    ) -> None:
        self.detail = detail
        self.cap_urn = cap_urn
        self.field = field
        super().__init__(self._compose())

    def _location(self) -> str:
        parts: list[str] = []
        if self.cap_urn is not None:
            parts.append(f"cap {self.cap_urn!r}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts)

    def _compose(self) -> str:
        where = self._location()
        return f"{where}: {self.detail}" if where else self.detail


class ManifestParseError(ManifestError):
    """The JSON is not a manifest: bad JSON, a missing or mistyped key, an
    unknown key in an arg or output, an empty ``aliases`` list, a ``carries``
    other than ``"input"``, a source with no known key, a bad channel."""


class ManifestRuleError(ManifestError):
    """A cap definition breaks one of the reference's numbered rules.

    :ivar rule: the rule id as the reference numbers it, e.g. ``"RULE3"``.
    """

    def __init__(
        self, rule: str, detail: str, *, cap_urn: str | None = None, field: str | None = None
    ) -> None:
        self.rule = rule
        super().__init__(detail, cap_urn=cap_urn, field=field)

    def _compose(self) -> str:
        where = self._location()
        return f"{self.rule}: {where}: {self.detail}" if where else f"{self.rule}: {self.detail}"


class ManifestUrnError(ManifestError):
    """A cap URN or media URN inside the manifest does not parse. The URN
    layer's own error is chained as ``__cause__``."""


class MissingIdentityCapError(ManifestError):
    """The manifest lacks the mandatory identity cap (``cap:effect=none``,
    compared as exact text, as the reference host does)."""


class PoolDeclarationError(ManifestError):
    """``pool_declarations`` is ill-formed or refers to something that does
    not exist (a reserved or cap-URN-shaped pool name, an undeclared member,
    a capacity key naming no cap, pool or ``all``).

    :ivar pool: the pool name or capacity key concerned, when there is one.
    """

    def __init__(
        self,
        detail: str,
        *,
        pool: str | None = None,
        cap_urn: str | None = None,
        field: str | None = None,
    ) -> None:
        self.pool = pool
        super().__init__(detail, cap_urn=cap_urn, field=field)


class UnknownPoolError(PoolDeclarationError):
    """A runtime pool operation (desired capacities from a heartbeat, a
    self-report, an admission) names a pool the table does not have. The
    runtime answers a heartbeat carrying one with ERR ``UNKNOWN_POOL``."""

    #: Wire error code the runtime uses when a heartbeat names an unknown pool.
    code = ErrorCode.UNKNOWN_POOL
