"""The package's one error tree: its root and its branch roots, side by side.

Every error the package raises derives from :class:`CartridgeRuntimeError`, which holds an
ERR's fields (``code``, ``attribution_class``, ``message``, ``arg_urn``) once and describes
itself as the package's one ERR value (:attr:`~CartridgeRuntimeError.report`, an
:class:`~cartridge_runtime.protocol.ErrorReport`). Four sibling branches grow from it; each
package adds its leaves under its own branch, in its own ``_errors`` module::

    CartridgeRuntimeError                   code, attribution_class, message, arg_urn, report
    ├── ProtocolError                       the wire: frames, codec, handshake, flow
    │   ├── LocalProtocolError              this side was about to break the protocol
    │   │   └── protocol.TelemetryError     a metric or trace event that cannot be sent
    │   └── RemoteProtocolError             the peer sent something invalid
    ├── EngineError                         the engine (misuse of its API included)
    │   ├── engine.CallError                a call failed: the cartridge's ERR, or the engine's
    │   └── engine.LaunchError              a placement could not start an instance
    ├── CartridgeError                      a handler's failure, and the runtime's own
    │   └── runtime.OpError                 the one a handler author raises to choose the ERR
    └── DefinitionError (ValueError)        text a person wrote, refused before any call
        ├── urn.UrnError                    a URN
        ├── manifest.ManifestError          a manifest or cap definition
        ├── machine.MachineError            machine notation
        ├── machine.MachineSourceError      a machine reference its source cannot load
        ├── planner.PlannerError            a planning query
        └── graph.GraphRefused              an operation on a growing graph

So ``except ProtocolError`` catches protocol faults only (an engine call that failed is not
one), ``except DefinitionError`` (or ``ValueError``) catches refused text, and
``except CartridgeRuntimeError`` catches everything the package raises on purpose.
"""

from __future__ import annotations

from typing import Any, Self

from ._report import AttributionClass, ErrorCode, ErrorReport, as_attribution_class, as_error_code

__all__ = (
    "CartridgeRuntimeError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "EngineError",
    "CartridgeError",
    "DefinitionError",
)


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


def _restore(cls: type[EngineError], args: tuple[Any, ...]) -> EngineError:
    """Unpickle an engine error: its class without ``__init__`` (the fields come back as its
    state), so each subclass's own constructor signature does not matter."""
    return cls.__new__(cls, *args)


class EngineError(CartridgeRuntimeError):
    """Root of the engine's errors (misuse of the engine API included).

    Every engine error pickles (to cross a process boundary, a Ray actor's for one) with its
    class and every field: ``code``, ``attribution_class``, ``message``, ``arg_urn`` and the
    subclass's own (``returncode``, ``stderr_tail``, ``step``...). A bare engine error (a
    misuse) has the ERR ``PROTOCOL_ERROR``/``internal``.
    """

    code = ErrorCode.PROTOCOL_ERROR

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args), dict(self.__dict__))


class CartridgeError(CartridgeRuntimeError):
    """Root of the runtime's errors; each maps to one ERR frame.

    Its default ERR is ``HANDLER_ERROR``/``internal``; without a message, the message is the
    class name.

    :ivar code: the ERR ``code``.
    :ivar attribution_class: the ERR ``attribution_class``.
    :ivar arg_urn: the argument media URN the failure is attributed to, if any.
    """

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        attribution_class: str | None = None,
        arg_urn: str | None = None,
    ) -> None:
        super().__init__(
            message or type(self).__name__,
            code=code,
            attribution_class=attribution_class,
            arg_urn=arg_urn,
        )


class DefinitionError(CartridgeRuntimeError, ValueError):
    """Root of the errors for text a person wrote that is refused before any call: a URN, a
    manifest, machine notation, a planning query. Its ERR is ``INVALID_INPUT``/``input`` when
    one must describe it (an engine or a runtime usually reports such text as its own, more
    precise, error)."""

    code = ErrorCode.INVALID_INPUT
    attribution_class = AttributionClass.INPUT
