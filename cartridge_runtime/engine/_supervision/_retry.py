"""Retries: which failures are tried again, and after how long (sans-IO; the randomness is
an argument).

Rules
-----
1. Only a failure of a class the policy names is retried (default ``environment``: the
   cartridge died, could not start, was retired), or of a code it names (default
   ``OOM_KILLED``, whose class is ``resource``); never an ``input`` or ``user`` failure.
2. Never once output has reached the caller: the caller would see it twice. Nor when an input
   was a stream that the first attempt consumed.
3. Attempt ``n`` (the first retry is ``n = 1``) waits ``backoff * 2 ** (n - 1)`` seconds,
   capped at ``max_delay``, times a jitter factor in ``[1, 1 + jitter)``: at least the base
   delay, so retries of many callers spread out instead of arriving together.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..._report import AttributionClass, ErrorCode

__all__ = ("Retry", "retry_refusal")


def _classes(value: Iterable[str]) -> frozenset[AttributionClass]:
    if isinstance(value, str):
        value = (value,)
    return frozenset(AttributionClass(v) for v in value)


def _codes(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        value = (value,)
    return frozenset(str(v) for v in value)


def _positive_int(instance: Any, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Retry {attribute.name} must be a whole number of at least 1")


def _seconds(instance: Any, attribute: Any, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"Retry {attribute.name} must be a number of seconds of 0 or more")


@attrs.frozen(kw_only=True)
class Retry:
    """How a call is tried again after a failure (see the module's rules).

    :ivar attempts: attempts in all, the first included (``Retry(attempts=3)``: two retries).
    :ivar backoff: the delay before the first retry, seconds; it doubles with each retry.
    :ivar max_delay: the longest delay (before jitter), seconds.
    :ivar jitter: each delay is multiplied by a random factor in ``[1, 1 + jitter)``.
    :ivar on: the attribution classes retried (``input`` and ``user`` never are).
    :ivar codes: error codes retried whatever their class.
    """

    attempts: int = attrs.field(default=3, validator=_positive_int)
    backoff: float = attrs.field(default=0.5, validator=_seconds)
    max_delay: float = attrs.field(default=30.0, validator=_seconds)
    jitter: float = attrs.field(default=0.5, validator=_seconds)
    on: frozenset[AttributionClass] = attrs.field(
        default=frozenset((AttributionClass.ENVIRONMENT,)), converter=_classes
    )
    codes: frozenset[str] = attrs.field(
        default=frozenset((ErrorCode.OOM_KILLED,)), converter=_codes
    )

    def __attrs_post_init__(self) -> None:
        refused = self.on & {AttributionClass.INPUT, AttributionClass.USER}
        if refused:
            words = ", ".join(sorted(refused))
            raise ValueError(f"Retry never retries {words} failures: a retry cannot help them")

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first), rule 3."""
        base = min(self.max_delay, self.backoff * 2.0 ** (retry - 1))
        return base * (1.0 + self.jitter * rand())

    def covers(self, code: str, attribution_class: str) -> bool:
        """Whether a failure with this code and class is retried (rule 1)."""
        if attribution_class in (AttributionClass.INPUT, AttributionClass.USER):
            return False
        return attribution_class in self.on or code in self.codes


def retry_refusal(
    policy: Retry,
    attempt: int,
    code: str,
    attribution_class: str,
    *,
    output_began: bool,
    replayable: bool,
) -> str | None:
    """Why attempt number ``attempt`` (1 for the first), which failed with ``code`` and
    ``attribution_class``, is not tried again, or ``None``: try again."""
    if not policy.covers(code, attribution_class):
        return "" if attempt == 1 else f"not retried: a {attribution_class} failure"
    if attempt >= policy.attempts:
        return f"after {attempt} attempts" if attempt > 1 else ""
    if output_began:
        return "not retried: output had already reached the caller"
    if not replayable:
        return "not retried: a streamed input was consumed by the failed attempt"
    return None
