"""Idle stop: has an instance had no call for its cartridge's ``idle_timeout``? (sans-IO)

Rules
-----
1. An instance is busy while it has requests in flight or queued, and each call routed to it
   counts as activity (a call that starts and ends between two looks is not missed).
2. Idle for ``idle_timeout`` seconds, it is stopped gracefully (stdin closed, then a kill after
   the shutdown grace) and reported ``idle``; the next call starts it again.
3. The watchdog looks every quarter of the timeout, so an instance stops between 1 and 1.25
   timeouts after its last call.
"""

from __future__ import annotations

import attrs

__all__ = ("IdleRecord", "judge_idle")


@attrs.frozen(kw_only=True)
class IdleRecord:
    """What the watchdog knows of one running instance's use.

    :ivar served: the instance's call count at the last look.
    :ivar since: when it was last seen busy (or started).
    """

    served: int
    since: float


def judge_idle(
    record: IdleRecord, served: int, busy: bool, now: float, timeout: float
) -> tuple[IdleRecord, bool]:
    """Look at an instance at ``now`` (``served`` calls so far, ``busy`` whether requests are
    in flight or queued); the new record and whether to stop it."""
    if busy or served != record.served:
        return IdleRecord(served=served, since=now), False
    return record, now - record.since >= timeout
