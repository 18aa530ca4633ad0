"""The package's one ERR value and its vocabulary: the attribution classes, the well-known
error codes and :class:`ErrorReport` (ERR-1, ERR-2, ERR-4, REQ-30).

This module imports nothing else of the package, so the error tree
(:mod:`cartridge_runtime.errors`) and every layer can build on it; the protocol package
re-exports these names where its users have always found them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

__all__ = (
    "AttributionClass",
    "ErrorCode",
    "ErrorReport",
    "as_error_code",
    "as_attribution_class",
    "err_meta",
)


class AttributionClass(enum.StrEnum):
    """Who is to blame for an error; decides whether a retry can help (ERR-2)."""

    INPUT = "input"  #: the caller's input is wrong; permanent
    USER = "user"  #: the user asked for it (e.g. cancelled); permanent
    RESOURCE = "resource"  #: a resource was missing or exhausted; may be retried
    ENVIRONMENT = "environment"  #: the process or machine failed; may be retried
    INTERNAL = "internal"  #: a bug or protocol fault; may be retried

    @property
    def retryable(self) -> bool:
        return self not in (AttributionClass.INPUT, AttributionClass.USER)


class ErrorCode(enum.StrEnum):
    """Well-known ERR codes (ERR-1). Handlers may use any other non-empty code."""

    HANDLER_ERROR = "HANDLER_ERROR"
    NO_HANDLER = "NO_HANDLER"
    PROTOCOL_VIOLATION = "PROTOCOL_VIOLATION"
    PROTOCOL_ERROR = "PROTOCOL_ERROR"
    INVALID_REQUEST = "INVALID_REQUEST"
    UNKNOWN_POOL = "UNKNOWN_POOL"
    CANCELLED = "CANCELLED"
    ABORTED = "ABORTED"
    ABORTED_COLLATERAL = "ABORTED_COLLATERAL"
    CARTRIDGE_DIED = "CARTRIDGE_DIED"
    CARTRIDGE_UNHEALTHY = "CARTRIDGE_UNHEALTHY"
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"
    CARTRIDGE_RETIRED = (
        "CARTRIDGE_RETIRED"  #: the cartridge was replaced or removed (HST-7, HST-21)
    )
    OOM_KILLED = "OOM_KILLED"  #: the instance passed its memory limit and was killed (HST-19)
    SPAWN_FAILED = "SPAWN_FAILED"
    MASTER_DIED = "MASTER_DIED"  #: the relay link to the host serving the request closed (RLY-10)
    CREDIT_VIOLATION = "CREDIT_VIOLATION"
    CHECKSUM_MISMATCH = "CHECKSUM_MISMATCH"
    NETWORK_POLICY = "NETWORK_POLICY"
    NETWORK_POLICY_UNSET = "NETWORK_POLICY_UNSET"
    TIMEOUT = "TIMEOUT"
    #: an output broke the rules or JSON Schema of its media definition (HST-24)
    OUTPUT_INVALID = "OUTPUT_INVALID"
    # The codes of this package's own typed errors (handler-side codes, ERR-4).
    INVALID_INPUT = "INVALID_INPUT"  #: an input that cannot be read as asked
    MISSING_INPUT = "MISSING_INPUT"  #: a required input stream that did not arrive
    INPUT_ALREADY_TAKEN = "INPUT_ALREADY_TAKEN"  #: a request's input package taken twice
    UNKNOWN_OUTPUT = "UNKNOWN_OUTPUT"  #: an output the cap does not declare
    UNKNOWN_ARGUMENT = "UNKNOWN_ARGUMENT"  #: an argument name the cap does not declare
    INVALID_CARTRIDGE = "INVALID_CARTRIDGE"  #: handlers and manifest that do not fit
    USAGE = "USAGE"  #: a CLI-mode command line that does not match the cap (CLI-*)
    INPUT_READ_FAILED = "INPUT_READ_FAILED"  #: CLI mode could not read standard input
    PEER_FAILED = "PEER_FAILED"  #: a test harness's peer callback raised an untyped error
    GRAPH_REFUSED = "GRAPH_REFUSED"  #: a graph operation refused (GRW-12)


_CODES: Final[Mapping[str, ErrorCode]] = {code.value: code for code in ErrorCode}
_CLASSES: Final[Mapping[str, AttributionClass]] = {cls.value: cls for cls in AttributionClass}

#: The message of the ERR that ends a request cancelled without a reason (FLW-18).
_CANCELLED_MESSAGE: Final = "Request cancelled"
#: What the ERR's message says before the host's text, for the two abort codes (FLW-18).
_ABORT_PREFIXES: Final[Mapping[str, str]] = {
    ErrorCode.ABORTED: "Request aborted by the host: ",
    ErrorCode.ABORTED_COLLATERAL: (
        "Request aborted as collateral of a failure elsewhere in the run: "
    ),
}


def as_error_code(code: str) -> str:
    """``code`` as its :class:`ErrorCode` member when it is a well-known code, else unchanged
    (handlers may use codes of their own, ERR-4)."""
    return _CODES.get(code, code)


def as_attribution_class(word: str) -> str:
    """``word`` as its :class:`AttributionClass` member when it is one, else unchanged (a peer
    may send a word ERR-1 does not allow; the report keeps what travelled)."""
    return _CLASSES.get(word, word)


@attrs.frozen(slots=True, kw_only=True)
class ErrorReport:
    """An ERR: why a request failed (ERR-1, ERR-2, REQ-30).

    ``code`` is an :class:`ErrorCode` member when the code is a well-known one, and
    ``attribution_class`` an :class:`AttributionClass` member when the word is one; both stay
    the text that travelled otherwise (both enums are ``StrEnum``: equal to, and written as,
    their text). :attr:`attribution` reads the class as the enum, an unknown word counting as
    ``internal``.
    """

    code: str = attrs.field(converter=as_error_code)
    attribution_class: str = attrs.field(converter=as_attribution_class)
    message: str
    arg_urn: str | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any] | None) -> ErrorReport:
        """The report an ERR frame's meta map carries (missing keys read as empty)."""
        meta = meta or {}
        return cls(
            code=str(meta.get("code") or ""),
            attribution_class=str(meta.get("attribution_class") or AttributionClass.INTERNAL),
            message=str(meta.get("message") or ""),
            arg_urn=meta.get("arg_urn"),
        )

    @classmethod
    def for_cancel(cls, meta: Mapping[str, Any] | None) -> ErrorReport:
        """The ERR that ends a request its peer cancelled, from the CANCEL's meta (the table of
        FLW-18: no meta is ``CANCELLED``/``internal``; ``ABORTED`` and ``ABORTED_COLLATERAL``
        wrap the host's text; any other code is kept with its message; an attribution class
        that is missing or not an ERR-1 word becomes ``internal``)."""
        if not isinstance(meta, Mapping) or not meta:
            return cls(
                code=ErrorCode.CANCELLED,
                attribution_class=AttributionClass.INTERNAL,
                message=_CANCELLED_MESSAGE,
            )
        code = as_error_code(str(meta.get("code") or ErrorCode.CANCELLED))
        attribution = _CLASSES.get(str(meta.get("attribution_class") or ""))
        detail = str(meta.get("message") or "")
        prefix = _ABORT_PREFIXES.get(code)
        if prefix is not None:
            message = prefix + detail
        elif code == ErrorCode.CANCELLED and not detail:
            message = _CANCELLED_MESSAGE
        else:
            message = detail or str(code)
        return cls(
            code=code,
            attribution_class=attribution or AttributionClass.INTERNAL,
            message=message,
        )

    @property
    def attribution(self) -> AttributionClass:
        """The attribution class as the enum (an unknown word counts as ``internal``)."""
        return _CLASSES.get(self.attribution_class, AttributionClass.INTERNAL)

    @property
    def retryable(self) -> bool:
        """Whether a retry can help, by attribution class (ERR-2)."""
        return self.attribution.retryable

    def for_sending(self) -> ErrorReport:
        """This report as this side writes it: an attribution class ERR-1 does not allow
        becomes ``internal`` (a receiver refuses any other word)."""
        if self.attribution_class in _CLASSES:
            return self
        return attrs.evolve(self, attribution_class=AttributionClass.INTERNAL)

    def one_line(self) -> str:
        """``CODE (class): message`` on one line (the message's first line), as a CLI
        prints a failure."""
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.code} ({self.attribution_class}): {first}"

    def to_meta(self) -> dict[str, Any]:
        """The ERR frame's meta map for this report (:func:`err_meta`)."""
        return err_meta(self.code, self.attribution_class, self.message, self.arg_urn)


def err_meta(
    code: str, attribution_class: str, message: str, arg_urn: str | None = None
) -> dict[str, Any]:
    """An ERR frame's meta map, in wire key order (REQ-30): ``message`` falls back to the code,
    ``arg_urn`` is written only when there is one."""
    meta: dict[str, Any] = {
        "code": str(code),
        "attribution_class": str(attribution_class),
        "message": message or str(code),
    }
    if arg_urn:
        meta["arg_urn"] = arg_urn
    return meta
