"""Conformance kit: certify any cartridge executable against Bifaci v6.

The kit drives a target process through raw frames built with the sans-IO core (never the
runtime or engine: it must send malformed and adversarial input), runs a catalogue of
numbered checks whose ids are rule ids of ``protocol_spec/rules.json``, and reports a
verdict per check. Every frame the target writes also goes through a frame audit whose
findings back the structural checks (seq, routing id, checksum, chunk index/count, ...).

Example::

    report = run_conformance("cartridges/interop.py")
    print(report.summary())
    assert report.ok
"""

from __future__ import annotations

from ._host_checks import HOST_CHECKS, run_host_conformance
from ._known import KNOWN_DEFECTS
from ._model import CATALOGUE, Check, CheckResult, Level, Status
from ._outcomes import CheckFailed, CheckSkipped
from ._runner import DEFAULT_TIMEOUT, Report, run_conformance, select_checks
from ._session import Session, target_command

__all__ = (
    "CATALOGUE",
    "DEFAULT_TIMEOUT",
    "HOST_CHECKS",
    "KNOWN_DEFECTS",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "Level",
    "Report",
    "Session",
    "Status",
    "run_conformance",
    "run_host_conformance",
    "select_checks",
    "target_command",
)
