"""Activity timeout: is a call silent past its limit? (sans-IO; ``now`` is an argument)

Rules
-----
1. A call is active while frames for it arrive, or while events wait unread by its caller (a
   caller that does not read stops the cartridge through credit: that silence is not the
   cartridge's).
2. Silent for a quarter, a half and three quarters of its limit, a call is warned about once
   each; silent for the whole limit, it is timed out.
3. The limit is the call's own ``activity_timeout=``, else its cartridge's, else its cap's
   metadata ``activity_timeout_secs``, else the engine's ``EngineConfig.activity_timeout``
   (the engine passes the cartridge's as ``per_call`` when the call has none).

The engine counts the frames each call receives (one integer per frame, nothing else on the
hot path); the watchdog looks at the count every quarter of the limit. Activity is therefore
noticed at the look after it, and a call times out between 1 and 1.25 limits after its last
frame.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping

import attrs

__all__ = (
    "ACTIVITY_METADATA_KEY",
    "Silence",
    "Verdict",
    "activity_limit",
    "check_limit",
    "judge_silence",
    "parse_seconds",
)

#: The cap metadata key that sets a cap's activity timeout, in seconds.
ACTIVITY_METADATA_KEY = "activity_timeout_secs"

#: Looks per limit: a call is looked at (and warned about) every quarter of its limit.
_QUARTERS = 4


class Verdict(enum.Enum):
    """What to do about one call after a look."""

    ACTIVE = "active"  #: frames arrived, or the call is within its limit
    WARN = "warn"  #: silent for another quarter of its limit
    EXPIRE = "expire"  #: silent for its whole limit: cancel it with ``TIMEOUT``


@attrs.frozen(kw_only=True)
class Silence:
    """What the watchdog knows of one call's activity.

    :ivar limit: the call's activity timeout, seconds.
    :ivar frames: the call's frame count at the last look.
    :ivar since: when the last change of that count was seen.
    :ivar warned: quarters of the limit already warned about.
    """

    limit: float
    frames: int
    since: float
    warned: int = 0

    @classmethod
    def begin(cls, limit: float, now: float) -> Silence:
        """The record of a call that opens at ``now``."""
        return cls(limit=limit, frames=0, since=now)

    @property
    def next_look(self) -> float:
        """When the call must be looked at next."""
        step = self.limit / _QUARTERS
        return self.since + step * (self.warned + 1)

    def silent_for(self, now: float) -> float:
        return max(0.0, now - self.since)


def judge_silence(
    record: Silence, frames: int, unread: bool, now: float
) -> tuple[Silence, Verdict]:
    """Look at a call at ``now``, its frame count being ``frames`` and ``unread`` whether
    events wait for its caller; the new record and what to do."""
    if frames != record.frames or unread:
        return attrs.evolve(record, frames=frames, since=now, warned=0), Verdict.ACTIVE
    silent = now - record.since
    if silent >= record.limit:
        return record, Verdict.EXPIRE
    quarters = min(_QUARTERS - 1, int(silent * _QUARTERS / record.limit))
    if quarters > record.warned:
        return attrs.evolve(record, warned=quarters), Verdict.WARN
    return record, Verdict.ACTIVE


def activity_limit(
    per_call: float | None, metadata: Mapping[str, str] | None, default: float | None
) -> float | None:
    """A call's activity timeout by rule 3, ``None`` when it has none (``math.inf`` given per
    call, or nothing set anywhere).

    :raises ValueError: the cap metadata's value is not a positive number of seconds.
    """
    if per_call is not None:
        return None if math.isinf(per_call) else per_call
    if metadata:
        text = metadata.get(ACTIVITY_METADATA_KEY)
        if text is not None:
            return parse_seconds(text, ACTIVITY_METADATA_KEY)
    return default


def parse_seconds(text: str, what: str) -> float:
    """A positive, finite number of seconds from a metadata text.

    :raises ValueError: anything else (the message names ``what``).
    """
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, not {text!r}")
    return value


def check_limit(value: float | None, what: str) -> float | None:
    """``value`` if it is ``None``, ``math.inf`` or a positive number of seconds.

    :raises ValueError: otherwise (the message names ``what``).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{what} must be a positive number of seconds, not {value!r}")
    return float(value)
