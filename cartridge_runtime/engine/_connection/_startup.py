"""Start-up of a cartridge connection, timed: HELLO, identity check, manifest, POLICY.

The steps and what each frame means are the sans-IO :class:`~cartridge_runtime.protocol.
HostHandshake`'s; this module only times them (each under ``EngineConfig.step_timeout``) and
checks the manifest. It talks to its connection through :class:`StartupLink`, and returns
either the manifest or a :class:`StartupFailure` naming the step: the connection turns that
into a :class:`~._errors.SpawnFailed` carrying the cartridge's stderr tail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio
import attrs

from ...protocol import Frame, HandshakeError, HostHandshake, ProtocolError, StartupProgress

if TYPE_CHECKING:
    from ...manifest import Manifest

__all__ = ("StartupFailure", "StartupLink", "run_startup")


class StartupLink(Protocol):
    """What the start-up needs from its connection."""

    @property
    def exit_description(self) -> str:
        """How the instance ended (``exit status 3``...), or ``still running``."""
        ...

    def send(self, frame: Frame) -> None: ...

    async def drain(self) -> None:
        """Wait until everything queued was handed to the pipe."""

    async def next_startup_event(self) -> StartupProgress | None:
        """The next start-up event the reader saw; ``None`` once the instance ended."""

    def end_reason(self) -> str:
        """Why the instance's output ended (``closed its stdout``...), once it did."""
        ...

    async def settle_stderr(self) -> None:
        """Give a failing cartridge a moment to finish writing its stderr."""


@attrs.frozen
class StartupFailure:
    """Why a start-up failed: the step (``hello``, ``identity``, ``manifest``, ``policy``),
    a message, and the manifest rule broken, if that is why."""

    step: str
    message: str
    rule: str | None = None
    #: The protocol error behind the failure (a wrong HELLO, a wrong identity echo...).
    cause: ProtocolError | None = None


async def run_startup(
    link: StartupLink, handshake: HostHandshake, step_timeout: float
) -> Manifest | StartupFailure:
    """Run the start-up steps; returns the cartridge's checked manifest, or why it failed
    (the handshake is then failed too)."""
    outcome = await _steps(link, handshake, step_timeout)
    if isinstance(outcome, StartupFailure):
        handshake.fail()
    return outcome


async def _steps(
    link: StartupLink, handshake: HostHandshake, step_timeout: float
) -> Manifest | StartupFailure:
    from ...manifest import Manifest, ManifestError, ManifestRuleError

    step = handshake.step
    timeout = step_timeout
    try:
        with anyio.fail_after(timeout):
            for frame in handshake.start():
                link.send(frame)
            step = handshake.step
            await _advance(link, step)  # the HELLO; the reader sent the identity request
        step = handshake.step
        with anyio.fail_after(timeout):
            await _advance(link, step)  # the identity echo
        step = handshake.step
        hello = handshake.hello
        assert hello is not None
        try:
            manifest = Manifest.from_json(hello.manifest)
            manifest.validate()
        except ManifestRuleError as exc:
            return StartupFailure(step, f"manifest breaks {exc}", exc.rule)
        except ManifestError as exc:
            return StartupFailure(step, f"manifest is invalid: {exc}")
        with anyio.fail_after(timeout):
            for frame in handshake.accept_manifest():
                link.send(frame)
            step = handshake.step
            await link.drain()
        if link.end_reason():  # its output ended after the echo: no use starting it
            raise _Ended(step)
    except TimeoutError:
        await link.settle_stderr()
        return StartupFailure(step, f"start-up step {step!r} got no answer within {timeout:g} s")
    except _Ended:
        await link.settle_stderr()
        reason = link.end_reason() or "ended"
        return StartupFailure(
            step,
            f"start-up step {step!r} failed: the cartridge {reason} ({link.exit_description})",
        )
    except ProtocolError as exc:
        await link.settle_stderr()
        return StartupFailure(step, f"start-up step {step!r} failed: {exc}", cause=exc)
    return manifest


async def _advance(link: StartupLink, step: str) -> None:
    """Wait for the reader's next start-up event.

    :raises HandshakeError: the frames were wrong.
    :raises _Ended: the instance ended first.
    """
    event = await link.next_startup_event()
    if event is None:
        raise _Ended(step)
    if event.error is not None:
        error: HandshakeError = event.error
        raise error


class _Ended(Exception):
    """The instance ended during the start-up."""
