"""Known defects of the reference runtime (capdag 1.524.58) the kit recognises.

A check that fails *exactly* the way the reference does says so in its result
(``known_defect``); it is still a failure. The table documents every annotation the kit
can make, keyed by check id.
"""

from __future__ import annotations

__all__ = ("KNOWN_DEFECTS", "audit_defect")

#: check id -> the reference defect the check catches.
KNOWN_DEFECTS: dict[str, str] = {
    "FRM-20": "capdag 1.524.58 prints 'Read error' and exits 0 on malformed input",
    "FRM-21": "capdag 1.524.58 sends no ERR before leaving on malformed input",
    "FRM-12": "capdag 1.524.58 exits 0 on an oversize length prefix",
    "FRM-16": (
        "capdag 1.524.58 keeps max_chunk above max_frame: the write fails (Frame too large) "
        "and leaves a seq gap"
    ),
    "REQ-14": "capdag 1.524.58's emitter write(raw) sends payloads without CBOR wrapping",
    "ERR-4": (
        "capdag 1.524.58 turns typed handler errors into HANDLER_ERROR/internal, dropping arg_urn"
    ),
}


def audit_defect(rule: str, findings: list[str]) -> str | None:
    """The known defect an audit finding is, when it matches one exactly."""
    if rule == "REQ-14" and all("not CBOR" in f or "not exactly one" in f for f in findings):
        return KNOWN_DEFECTS["REQ-14"] + " (if the target is built on it)"
    return None
