"""The error hierarchy of the protocol core.

One root, :class:`ProtocolError`, carries the wire error ``code`` and ``attribution_class``
an ERR frame would use. :class:`LocalProtocolError` means *we* were about to break the
protocol (a bug or misuse on this side); :class:`RemoteProtocolError` means the peer sent
something invalid. Foreign exceptions (cbor2, struct, Unicode, key and type errors) never
escape the codec: :func:`map_exceptions` wraps them at the edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ._constants import AttributionClass, ErrorCode


class ProtocolError(Exception):
    """Root of every error this package raises for protocol reasons.

    :ivar code: the ERR code this error maps to on the wire.
    :ivar attribution_class: the ERR attribution class.
    :ivar arg_urn: the argument media URN the error is attributed to, if any.
    """

    code: str = ErrorCode.PROTOCOL_ERROR
    attribution_class: str = AttributionClass.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        attribution_class: str | None = None,
        arg_urn: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if attribution_class is not None:
            self.attribution_class = attribution_class
        self.arg_urn = arg_urn

    def __str__(self) -> str:
        return self.message

    def to_err_meta(self) -> dict[str, object]:
        """The ERR meta map for this error, in wire key order."""
        meta: dict[str, object] = {
            "code": str(self.code),
            "attribution_class": str(self.attribution_class),
            "message": self.message or str(self.code),
        }
        if self.arg_urn:
            meta["arg_urn"] = self.arg_urn
        return meta


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
