"""Keeping a long-running engine healthy: call activity, memory, idle instances, retries,
draining, and the events that report them. The decisions are sans-IO (``now`` is an
argument); :mod:`._watchdog` and :mod:`._drain` are the thin shells that sleep and act."""
