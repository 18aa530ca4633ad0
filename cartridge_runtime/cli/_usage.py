"""The one usage error of the ``cartridge`` command.

Every command raises :class:`UsageError` for a command line it cannot run (a missing file, a
malformed option, contradictory options, a run that does not exist): one readable line on
stderr and exit status 2, found before anything is started when it can be. It is refused text a
person wrote, so it sits under :class:`~cartridge_runtime.errors.DefinitionError`.
"""

from __future__ import annotations

from typing import Final

from ..errors import DefinitionError

__all__ = ("UsageError", "USAGE_STATUS")

#: The exit status of a usage error (as click's own).
USAGE_STATUS: Final = 2


class UsageError(DefinitionError):
    """The command line is wrong; the message is one readable line."""
