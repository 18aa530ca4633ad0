"""The network policy as a handler sees it: :class:`Reach` and :class:`NetworkAccess`.

Kept apart from the handler contexts so that :mod:`._request` and :mod:`._context` need not
import each other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from cartridge_runtime.protocol import AttributionClass, ErrorCode, NetworkPolicy

from ._errors import NetworkPolicyError


class Reach(enum.Enum):
    """What a network call reaches; the host's policy decides on it."""

    THIRD_PARTY = "an outside service"
    OUR_SERVICES = "our own services"
    TELEMETRY = "analytics"


class NetworkAccess:
    """The live network policy of a request: ``allow(reach)`` raises when refused.

    Reads the runtime's latest POLICY each time, so a policy change reaches running handlers.
    """

    __slots__ = ("_current",)

    def __init__(self, current: Callable[[], str | None]) -> None:
        self._current = current

    @property
    def policy(self) -> str | None:
        """The policy word in force (``offline``, ``no_telemetry``, ``full``) or ``None``."""
        return self._current()

    def allows(self, reach: Reach | str = Reach.THIRD_PARTY) -> bool:
        """Whether a call of this reach may be made now (no policy → ``False``)."""
        word = self._current()
        reach = Reach(reach) if not isinstance(reach, Reach) else reach
        if word == NetworkPolicy.FULL:
            return True
        if word == NetworkPolicy.NO_TELEMETRY:
            return reach is not Reach.TELEMETRY
        return False

    def allow(self, reach: Reach | str = Reach.THIRD_PARTY) -> None:
        """Check a reach before making the call.

        :raises NetworkPolicyError: refused (``NETWORK_POLICY``/user), or no policy yet
            (``NETWORK_POLICY_UNSET``/internal).
        """
        word = self._current()
        r = Reach(reach) if not isinstance(reach, Reach) else reach
        if word is None:
            raise NetworkPolicyError(
                f"no network policy has been given; refusing to reach {r.value}",
                code=ErrorCode.NETWORK_POLICY_UNSET,
                attribution_class=AttributionClass.INTERNAL,
            )
        if not self.allows(r):
            raise NetworkPolicyError(f"network policy '{word}' refuses reaching {r.value}")

    def __repr__(self) -> str:
        return f"NetworkAccess(policy={self._current()!r})"
