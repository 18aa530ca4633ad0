"""The host side of a connection's start-up, sans-IO: HELLO, identity check, manifest, POLICY.

A :class:`HostHandshake` walks the phases of :data:`STARTUP_TRANSITIONS`; each method returns
the frames to send and moves one step, and a frame or step the phase does not allow fails the
start-up. It keeps no clock: the shell times each phase (the engine's ``step_timeout``) and
calls :meth:`HostHandshake.fail` when one runs out. The manifest is checked by the caller
(the manifest package is not the protocol's business); :meth:`HostHandshake.accept_manifest`
or :meth:`HostHandshake.fail` tells the outcome.

Used by the engine's connection and by the test harness, so the host handshake is written
once outside the conformance kit (which keeps its own on purpose, to probe deviations).
"""

from __future__ import annotations

import enum

from . import _builders as build
from ._constants import NetworkPolicy
from ._errors import HandshakeError, LocalProtocolError
from ._frame import Frame
from ._handshake import CartridgeHello, IdentityCheck, accept_cartridge_hello
from ._limits import Limits

__all__ = ("STARTUP_TRANSITIONS", "HostHandshake", "StartupInput", "StartupPhase")


class StartupPhase(enum.Enum):
    """Where a host's start-up of one cartridge connection stands (HSK-*)."""

    NEW = "new"  #: nothing sent yet
    HELLO = "hello"  #: our HELLO is out; the cartridge's HELLO is awaited
    IDENTITY = "identity"  #: limits negotiated; the identity echo is awaited (HSK-6)
    MANIFEST = "manifest"  #: the echo matched; the caller checks the manifest
    POLICY = "policy"  #: POLICY is queued; the caller waits for it to reach the pipe
    DONE = "done"  #: started: requests may flow
    FAILED = "failed"  #: the start-up failed; the connection is of no use


class StartupInput(enum.Enum):
    """What moves a start-up from one phase to the next."""

    SEND_HELLO = "send_hello"
    HELLO_ACCEPTED = "hello_accepted"
    ECHO_CONFIRMED = "echo_confirmed"
    MANIFEST_ACCEPTED = "manifest_accepted"
    POLICY_DELIVERED = "policy_delivered"
    FAIL = "fail"


_P = StartupPhase
_I = StartupInput

#: (phase, input) -> next phase; a pair not listed is a misuse (:class:`LocalProtocolError`).
STARTUP_TRANSITIONS: dict[tuple[StartupPhase, StartupInput], StartupPhase] = {
    (_P.NEW, _I.SEND_HELLO): _P.HELLO,
    (_P.HELLO, _I.HELLO_ACCEPTED): _P.IDENTITY,
    (_P.IDENTITY, _I.ECHO_CONFIRMED): _P.MANIFEST,
    (_P.MANIFEST, _I.MANIFEST_ACCEPTED): _P.POLICY,
    (_P.POLICY, _I.POLICY_DELIVERED): _P.DONE,
    **{
        (phase, _I.FAIL): _P.FAILED
        for phase in (_P.NEW, _P.HELLO, _P.IDENTITY, _P.MANIFEST, _P.POLICY)
    },
}

#: Phases that read frames from the cartridge (every other phase routes them as requests).
_READING = frozenset((_P.HELLO, _P.IDENTITY))


class HostHandshake:
    """The host's start-up of one connection (see the module docstring).

    :param limits: the host's own limits, offered in HELLO.
    :param policy: the POLICY word sent once the manifest is accepted (``None``: none).
    :param identity: the identity check to run (default: a fresh random nonce).
    """

    def __init__(
        self,
        limits: Limits,
        policy: NetworkPolicy | str | None,
        identity: IdentityCheck | None = None,
    ) -> None:
        self.phase = StartupPhase.NEW
        self.offered = limits
        #: The negotiated limits once the cartridge's HELLO was accepted (ours before).
        self.limits = limits
        self.policy = None if policy is None else NetworkPolicy(policy)
        self.identity = identity if identity is not None else IdentityCheck()
        #: What the cartridge's HELLO said, once accepted.
        self.hello: CartridgeHello | None = None
        #: Why the start-up failed, when a frame made it fail.
        self.error: HandshakeError | None = None

    def _move(self, inp: StartupInput) -> None:
        nxt = STARTUP_TRANSITIONS.get((self.phase, inp))
        if nxt is None:
            raise LocalProtocolError(
                f"start-up: {inp.value} is not allowed in phase {self.phase.value}"
            )
        self.phase = nxt

    @property
    def reading(self) -> bool:
        """Whether frames from the cartridge belong to the start-up (HELLO, identity echo)."""
        return self.phase in _READING

    @property
    def step(self) -> str:
        """The name of the phase for messages: ``hello``, ``identity``, ``manifest``..."""
        return self.phase.value

    def start(self) -> list[Frame]:
        """The frames that open the connection: our HELLO."""
        self._move(_I.SEND_HELLO)
        return [build.hello(self.offered)]

    def receive(self, frame: Frame) -> list[Frame]:
        """Take one frame from the cartridge during :attr:`reading`; returns the frames to send.

        Frames of other requests during the identity phase are skipped (HSK-6), as the
        reference host does.

        :raises HandshakeError: the HELLO or the identity echo is wrong (the phase is then
            ``FAILED`` and :attr:`error` says why).
        :raises LocalProtocolError: not in a reading phase.
        """
        try:
            if self.phase is StartupPhase.HELLO:
                self.hello = accept_cartridge_hello(frame, self.offered)
                self.limits = self.hello.limits
                self._move(_I.HELLO_ACCEPTED)
                return self.identity.frames()
            if self.phase is StartupPhase.IDENTITY:
                if self.identity.receive(frame):
                    self._move(_I.ECHO_CONFIRMED)
                return []
        except HandshakeError as exc:
            self.error = exc
            self._move(_I.FAIL)
            raise
        raise LocalProtocolError(f"start-up: no frame is expected in phase {self.phase.value}")

    def accept_manifest(self) -> list[Frame]:
        """The caller found the manifest good: the frames to send next (POLICY, unless the
        policy is ``None``)."""
        self._move(_I.MANIFEST_ACCEPTED)
        return [] if self.policy is None else [build.policy(self.policy)]

    def delivered(self) -> None:
        """The POLICY frame reached the pipe: the connection is started."""
        self._move(_I.POLICY_DELIVERED)

    def fail(self) -> None:
        """The start-up failed outside the frames (a timeout, a manifest refused, the process
        ending); a no-op once done or failed."""
        if self.phase not in (StartupPhase.DONE, StartupPhase.FAILED):
            self._move(_I.FAIL)
