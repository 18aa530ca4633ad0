"""The protocol core's leaves of the error tree (the root and the branch roots are in
:mod:`cartridge_runtime.errors`), and :func:`map_exceptions`, which wraps the foreign
exceptions of the codec at the edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ..errors import CartridgeRuntimeError as CartridgeRuntimeError
from ..errors import LocalProtocolError as LocalProtocolError
from ..errors import ProtocolError as ProtocolError
from ..errors import RemoteProtocolError as RemoteProtocolError
from ._constants import AttributionClass, ErrorCode


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
