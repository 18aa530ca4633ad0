"""Errors a handler raises or meets, and how each reaches the wire.

Every error here derives from :class:`CartridgeError`, the runtime's branch of the package's
error tree (:class:`~cartridge_runtime.protocol.CartridgeRuntimeError`, which holds the ERR's
fields). Those that end a request carry the ``code`` / ``attribution_class`` / ``arg_urn`` of
the ERR frame the runtime writes for them (as class attributes, which an instance may
override; ``error.report`` is that ERR). :class:`OpError` is the one a
handler author raises (or subclasses) to choose the ERR exactly; any exception that is not a
:class:`CartridgeError` becomes ``HANDLER_ERROR``/``internal`` with its type and message
(:func:`handler_error_message`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from ..errors import CartridgeError as CartridgeError
from ..protocol import (
    AttributionClass,
    ErrorCode,
    ErrorReport,
)


def handler_error_message(exc: BaseException) -> str:
    """The ``HANDLER_ERROR`` message for an exception a handler let escape: its type, then its
    text (``KeyError: 'x'``, ``ValueError: bad``), or the type alone when it has no text."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


class OpError(CartridgeError):
    """Raise this from a handler to end the request with exactly this ERR.

    Either pass everything (``OpError("BAD_PAGE", "page 3 is empty", "input")``) or declare
    a subclass with class attributes and raise it with just a message::

        class BadPage(OpError):
            code = "BAD_PAGE"
            attribution_class = AttributionClass.INPUT
    """

    def __init__(
        self,
        code_or_message: str,
        message: str | None = None,
        attribution_class: str | None = None,
        arg_urn: str | None = None,
    ) -> None:
        if message is None:
            super().__init__(code_or_message, attribution_class=attribution_class, arg_urn=arg_urn)
        else:
            super().__init__(
                message, code=code_or_message, attribution_class=attribution_class, arg_urn=arg_urn
            )

    @classmethod
    def from_report(cls, report: ErrorReport) -> Self:
        """The error that ends the request with exactly ``report`` (a peer's ERR passed on)."""
        return cls(report.code, report.message, report.attribution_class, report.arg_urn)


class InputConsumedError(CartridgeError):
    """``take_input()`` was called a second time for the same request."""

    code = ErrorCode.INPUT_ALREADY_TAKEN


class UnknownOutput(CartridgeError):
    """``output_for(urn_or_name)`` named an output the cap does not declare."""

    code = ErrorCode.UNKNOWN_OUTPUT

    def __init__(self, cap_urn: str, media_urn: str, declared: Sequence[str] = ()) -> None:
        listed = ", ".join(declared) or "none"
        super().__init__(f"cap {cap_urn!r} declares no output {media_urn!r} (declared: {listed})")
        self.cap_urn = cap_urn
        self.media_urn = media_urn
        self.declared = tuple(declared)


class MissingInput(CartridgeError):
    """A required input stream did not arrive; names what was wanted and what came.

    :ivar name: the argument's name when it was looked up by name, else ``None``.
    :ivar index: which stream of that argument was wanted (0 for the first).
    """

    code = ErrorCode.MISSING_INPUT
    attribution_class = AttributionClass.INPUT

    def __init__(
        self, wanted: str, arrived: Sequence[str], *, name: str | None = None, index: int = 0
    ) -> None:
        listed = ", ".join(arrived) or "none"
        what = wanted if name is None else f"{name!r} ({wanted})"
        if index:
            what = f"stream {index} of {what}"
        super().__init__(
            f"Missing required arg: {what} (streams that arrived: {listed})", arg_urn=wanted
        )
        self.wanted = wanted
        self.arrived = tuple(arrived)
        self.name = name
        self.index = index


class UnknownArgument(CartridgeError):
    """A lookup by argument name named no argument of the cap's definition (a handler bug:
    the name is the manifest's, not the caller's)."""

    code = ErrorCode.UNKNOWN_ARGUMENT

    def __init__(self, cap_urn: str, name: str, declared: Sequence[str] = ()) -> None:
        listed = ", ".join(repr(n) for n in declared) or "none (no cap definition)"
        super().__init__(f"cap {cap_urn!r} declares no argument {name!r} (declared: {listed})")
        self.cap_urn = cap_urn
        self.name = name
        self.declared = tuple(declared)


class InputDecodeError(CartridgeError):
    """An input could not be read as asked (invalid UTF-8, a collector on an unbounded stream...)."""

    code = ErrorCode.INVALID_INPUT
    attribution_class = AttributionClass.INPUT


class InputStreamError(CartridgeError):
    """An input stream broke (bad checksum, credit violation, undecodable payload, abandoned).

    ``code`` is the code of the underlying protocol error.
    """


class OutputError(CartridgeError):
    """An output was used wrongly (written after close, item on a scalar stream...)."""


class NetworkPolicyError(CartridgeError):
    """The host's network policy refuses this reach (``NETWORK_POLICY``, class ``user``), or no
    policy has been given yet (``NETWORK_POLICY_UNSET``, class ``internal``)."""

    code = ErrorCode.NETWORK_POLICY
    attribution_class = AttributionClass.USER


class RequestCancelled(CartridgeError):
    """The request was cancelled; raised inside a synchronous handler at its next runtime call."""

    code = ErrorCode.CANCELLED


class PeerCallError(CartridgeError):
    """A peer call failed: the peer answered ERR (its code, class and arg_urn are kept) or the
    call could not be made."""


class SetupError(CartridgeError):
    """The cartridge is put together wrongly (found before it serves anything): two caps share
    an alias, a declared cap has no handler, or a handler serves a cap the manifest does not
    declare. The message is one line naming every problem."""

    code = ErrorCode.INVALID_CARTRIDGE
