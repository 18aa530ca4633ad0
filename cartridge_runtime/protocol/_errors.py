"""The package's error tree, and the protocol core's branch of it.

Every error the package raises for a failure an ERR can describe derives from one root,
:class:`CartridgeRuntimeError`, which holds the ERR's fields (``code``, ``attribution_class``,
``message``, ``arg_urn``) once and describes itself as the package's one ERR value
(:attr:`~CartridgeRuntimeError.report`, an :class:`ErrorReport`). Three sibling branches
grow from it::

    CartridgeRuntimeError                   code, attribution_class, message, arg_urn, report
    ├── ProtocolError                       the wire: frames, codec, handshake, flow
    │   ├── LocalProtocolError              this side was about to break the protocol
    │   └── RemoteProtocolError             the peer sent something invalid
    ├── engine.EngineError                  the engine (misuse of its API included)
    │   └── engine.CallError                a call failed: the cartridge's ERR, or the engine's
    └── runtime.CartridgeError              a handler's failure, and the runtime's own
        └── runtime.OpError                 the one a handler author raises to choose the ERR

So ``except ProtocolError`` catches protocol faults only (an engine call that failed is not
one), and ``except CartridgeRuntimeError`` catches everything an ERR can describe. Input that is
refused before any ERR exists (a manifest, a URN, a machine text) raises the ``ValueError``
roots :class:`~cartridge_runtime.manifest.ManifestError`,
:class:`~cartridge_runtime.urn.UrnError` and :class:`~cartridge_runtime.machine.MachineError`
instead; the runtime and the engine turn those into the proper ERR themselves.

Foreign exceptions (cbor2, struct, Unicode, key and type errors) never escape the codec:
:func:`map_exceptions` wraps them at the edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Self

from ._constants import AttributionClass, ErrorCode
from ._events import ErrorReport, as_attribution_class, as_error_code


class CartridgeRuntimeError(Exception):
    """Root of every error the package raises that an ERR describes (see the module docstring).

    A subclass sets its default ``code`` and ``attribution_class`` as class attributes; an
    instance may override them (and ``arg_urn``) through the keyword arguments. A well-known
    code is held as its :class:`ErrorCode` member and an ERR-1 word as its
    :class:`AttributionClass` member (both equal to their text).

    :ivar code: the ERR ``code``.
    :ivar attribution_class: the ERR ``attribution_class``.
    :ivar message: the human-readable reason (the ERR ``message``).
    :ivar arg_urn: the argument media URN the failure is attributed to, if any.
    """

    code: str = ErrorCode.HANDLER_ERROR
    attribution_class: str = AttributionClass.INTERNAL
    arg_urn: str | None = None

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        attribution_class: str | None = None,
        arg_urn: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = as_error_code(str(code))
        if attribution_class is not None:
            self.attribution_class = as_attribution_class(str(attribution_class))
        if arg_urn is not None:
            self.arg_urn = arg_urn

    @classmethod
    def from_report(cls, report: ErrorReport) -> Self:
        """The error of this class that carries ``report`` (a peer's ERR, for one); for a class
        whose constructor takes the root's arguments."""
        return cls(
            report.message,
            code=report.code,
            attribution_class=report.attribution_class,
            arg_urn=report.arg_urn,
        )

    def __str__(self) -> str:
        return self.message

    @property
    def report(self) -> ErrorReport:
        """This error as the package's one ERR value."""
        return ErrorReport(
            code=self.code,
            attribution_class=self.attribution_class,
            message=self.message,
            arg_urn=self.arg_urn,
        )

    @property
    def retryable(self) -> bool:
        """Whether a retry can help (ERR-2: ``input`` and ``user`` failures are permanent)."""
        return self.report.retryable

    def to_err_meta(self) -> dict[str, object]:
        """The ERR meta map for this error, in wire key order."""
        return self.report.to_meta()


class ProtocolError(CartridgeRuntimeError):
    """Root of the protocol core's errors: a frame, a flow or a handshake broke the protocol.

    Its default ERR is ``PROTOCOL_ERROR``/``internal``; the message is required.
    """

    code = ErrorCode.PROTOCOL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        attribution_class: str | None = None,
        arg_urn: str | None = None,
    ) -> None:
        super().__init__(message, code=code, attribution_class=attribution_class, arg_urn=arg_urn)


class LocalProtocolError(ProtocolError):
    """This side was about to send something the protocol forbids."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids."""


class FrameDecodeError(RemoteProtocolError):
    """A frame body is not a valid Bifaci frame (bad CBOR, missing or mistyped key)."""


class FrameTooLargeError(RemoteProtocolError):
    """A length prefix announces a body over the negotiated max_frame or the hard cap."""


class FrameEncodeError(LocalProtocolError):
    """A frame cannot be encoded (too large, or a field of the wrong type)."""


class FrameTooLargeToSendError(FrameEncodeError, FrameTooLargeError):
    """A frame this side was about to send has a body over ``max_frame`` or the hard cap:
    a :class:`FrameTooLargeError`, as the same frame is when decoded, and a
    :class:`FrameEncodeError` (nothing was sent)."""


class ChecksumMismatchError(RemoteProtocolError):
    """A CHUNK payload does not match its FNV-1a 64 checksum."""

    code = ErrorCode.HANDLER_ERROR


class HandshakeError(RemoteProtocolError):
    """The HELLO exchange failed (wrong version, missing limit, bad manifest...)."""

    code = ErrorCode.SPAWN_FAILED
    attribution_class = AttributionClass.ENVIRONMENT


class VersionMismatchError(HandshakeError):
    """The peer's HELLO does not announce protocol version 6."""


class IdentityCheckError(HandshakeError):
    """The cartridge's echo of the identity nonce is wrong."""


class StreamStateError(RemoteProtocolError):
    """A frame arrived in a request or stream state that does not allow it."""


class CreditViolationError(RemoteProtocolError):
    """A CHUNK arrived while the receiver's window for its stream was spent."""

    code = ErrorCode.CREDIT_VIOLATION


class StreamAbandonedError(ProtocolError):
    """The request was cancelled or its peer vanished while a stream was still open."""

    code = ErrorCode.CANCELLED


@contextlib.contextmanager
def map_exceptions(
    mapping: Mapping[type[BaseException], type[ProtocolError]],
    *,
    prefix: str = "",
) -> Iterator[None]:
    """Re-raise any exception listed in ``mapping`` as its :class:`ProtocolError` twin.

    The original exception stays attached as ``__cause__`` for debugging.
    """
    try:
        yield
    except ProtocolError:
        raise
    except Exception as exc:
        for from_exc, to_exc in mapping.items():
            if isinstance(exc, from_exc):
                raise to_exc(
                    f"{prefix}{exc}" if prefix else str(exc) or type(exc).__name__
                ) from exc
        raise
