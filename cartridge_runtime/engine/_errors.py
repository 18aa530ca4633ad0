"""Errors the engine raises.

Every failure a caller can see is a :class:`CallError` carrying the same four fields as an ERR
frame (code, attribution class, message, arg_urn; ``error.report`` is that ERR), whether it came
from a cartridge's ERR or was made by the engine itself (a cartridge that died, failed to start,
or no route). The root :class:`EngineError` is the engine's branch of the package's error tree
(:class:`~cartridge_runtime.protocol.CartridgeRuntimeError`), a sibling of
:class:`~cartridge_runtime.protocol.ProtocolError`: a failed call is not a protocol fault, and
``except CartridgeRuntimeError`` catches both.
"""

from __future__ import annotations

from typing import Self

from ..errors import EngineError as EngineError
from ..protocol import AttributionClass, ErrorCode, ErrorReport

__all__ = (
    "CallError",
    "CallTimeout",
    "CartridgeDied",
    "CartridgeNotFound",
    "CartridgeUnhealthy",
    "EngineClosed",
    "EngineError",
    "NoRoute",
    "SpawnFailed",
)


class CallError(EngineError):
    """A call failed: an ERR from the cartridge, or a failure the engine attributes to it.

    :ivar code: the ERR code (``HANDLER_ERROR``, ``CANCELLED``, ``CARTRIDGE_DIED``...).
    :ivar attribution_class: ``input``, ``user``, ``resource``, ``environment`` or ``internal``.
    :ivar message: the human-readable reason.
    :ivar arg_urn: the argument the error is attributed to, or ``None``.
    """

    def __init__(
        self,
        code: str,
        attribution_class: str,
        message: str,
        arg_urn: str | None = None,
    ) -> None:
        super().__init__(
            message, code=str(code), attribution_class=str(attribution_class), arg_urn=arg_urn
        )

    @classmethod
    def from_report(cls, report: ErrorReport) -> Self:
        """The call error that carries ``report`` (a cartridge's ERR, for one); for a class
        whose constructor takes :class:`CallError`'s arguments."""
        return cls(report.code, report.attribution_class, report.message, report.arg_urn)

    def one_line(self) -> str:
        """``CODE (class): message`` on one line, as the CLI prints it."""
        return self.report.one_line()

    def __str__(self) -> str:
        """The one-line form, code first (:meth:`one_line`); ``message`` has the whole text."""
        return self.one_line()

    def __repr__(self) -> str:
        fields = (str(self.code), str(self.attribution_class), self.message, self.arg_urn)
        return f"{type(self).__name__}{fields!r}"


class CartridgeDied(CallError):
    """The cartridge process ended (or was killed) while the call was pending.

    The message names the exit status or signal and ends with the cartridge's stderr tail.

    :ivar returncode: the process exit status (negative: killed by that signal), if known.
    :ivar stderr_tail: the last lines the cartridge wrote to stderr.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
        code: str = ErrorCode.CARTRIDGE_DIED,
    ) -> None:
        super().__init__(code, AttributionClass.ENVIRONMENT, message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class CartridgeUnhealthy(CartridgeDied):
    """The engine killed the cartridge because it stopped answering health probes
    (``EngineConfig.heartbeat_misses_to_kill``); code ``CARTRIDGE_UNHEALTHY``. The next call
    starts it again."""

    def __init__(
        self, message: str, *, returncode: int | None = None, stderr_tail: str = ""
    ) -> None:
        super().__init__(
            message,
            returncode=returncode,
            stderr_tail=stderr_tail,
            code=ErrorCode.CARTRIDGE_UNHEALTHY,
        )


class SpawnFailed(CallError):
    """A cartridge could not be started: spawn, HELLO, identity check, manifest or POLICY failed.

    Raised again, immediately, by every later call routed to that cartridge until
    :meth:`Engine.restart` (or the configured retry delay passes).

    :ivar step: the start-up step that failed (``spawn``, ``hello``, ``identity``, ``manifest``,
        ``policy``).
    :ivar rule: for a manifest failure, the rule broken (``RULE3``...), else ``None``.
    :ivar stderr_tail: the last lines the cartridge wrote to stderr.
    """

    def __init__(
        self, message: str, *, step: str, rule: str | None = None, stderr_tail: str = ""
    ) -> None:
        super().__init__(ErrorCode.SPAWN_FAILED, AttributionClass.ENVIRONMENT, message)
        self.step = step
        self.rule = rule
        self.stderr_tail = stderr_tail


class CartridgeNotFound(SpawnFailed):
    """:meth:`Engine.add_cartridge` was given a script or executable that does not exist
    (raised at once, before anything is spawned).

    :ivar path: the missing path or command name.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"no such cartridge: {path} (file or command not found)", step="spawn")
        self.path = path


class NoRoute(CallError):
    """No cartridge provides the requested cap."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NO_HANDLER, AttributionClass.ENVIRONMENT, message)


class CallTimeout(CallError):
    """A call did not finish within its ``timeout=`` (code ``TIMEOUT``, class ``resource``).

    The engine sent the cartridge a CANCEL for it and failed it at once.
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.TIMEOUT, AttributionClass.RESOURCE, message)


class EngineClosed(CallError):
    """The engine shut down while the call was pending (or was used after shutdown)."""

    def __init__(self, message: str = "the engine is shut down") -> None:
        super().__init__(ErrorCode.CARTRIDGE_RETIRED, AttributionClass.ENVIRONMENT, message)
