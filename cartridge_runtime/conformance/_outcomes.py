"""How a check ends other than with a pass: the two exceptions a check raises.

They live apart from the catalogue's model so that :class:`CheckContext`, which raises them on
a check's behalf, and the model, which names the context in a check's signature, do not import
each other.
"""

from __future__ import annotations

__all__ = ("CheckFailed", "CheckSkipped")


class CheckFailed(Exception):
    """Raised by a check: the target broke the rule. ``known_defect`` names a reference
    (capdag 1.524.58) defect when the observed behaviour is exactly that defect."""

    def __init__(self, detail: str, *, known_defect: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.known_defect = known_defect


class CheckSkipped(Exception):
    """Raised by a check: the target offers nothing to exercise it (the reason says what)."""
