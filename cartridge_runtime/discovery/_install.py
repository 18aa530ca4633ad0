"""The installed layout's rules that need no disk (sans-IO): reading a ``cartridge.json``,
ordering version folders, and the folder checks of a managed tree.

Rules (chapter 15 of the protocol spec):

1. A ``cartridge.json`` is a JSON object with ``name``, ``version``, ``channel`` (``release``
   or ``nightly``), ``registry_url`` (present, text or null), ``entry`` and ``installed_at``;
   other keys are kept or ignored, never an error (DSC-4).
2. The entry is a relative path that stays inside its version folder (DSC-5).
3. Of a name folder's versions, the newest by version order is the candidate; the others are
   superseded (DSC-6).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Final

from ._model import InstallRecord

__all__ = ("InstallRecordError", "parse_install_record", "version_key", "entry_escapes")

#: Size past which a ``cartridge.json`` is refused unread: the record is a few hundred bytes.
MAX_RECORD_BYTES: Final = 1 << 20

_CHANNELS: Final = ("release", "nightly")
_PIECE: Final = re.compile(r"(\d+)|(\D+)")


class InstallRecordError(ValueError):
    """A ``cartridge.json`` that is not one; the message says what is wrong, in one line."""


def _text(obj: dict[str, Any], key: str, *, nullable: bool = False) -> Any:
    if key not in obj:
        raise InstallRecordError(f"missing required field {key!r}")
    value = obj[key]
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value.strip():
        kind = "text or null" if nullable else "non-empty text"
        raise InstallRecordError(f"field {key!r} must be {kind}, not {value!r}")
    return value


def parse_install_record(data: bytes) -> InstallRecord:
    """Read a ``cartridge.json`` (DSC-4).

    :raises InstallRecordError: bad UTF-8 or JSON, not an object, a required field missing or
        mistyped, an unknown channel, a bad ``fabric_manifest_version``.
    """
    if len(data) > MAX_RECORD_BYTES:
        raise InstallRecordError(f"larger than {MAX_RECORD_BYTES} bytes")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InstallRecordError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InstallRecordError(f"not a JSON object but {type(obj).__name__}")
    channel = _text(obj, "channel")
    if channel not in _CHANNELS:
        raise InstallRecordError(f"channel must be 'release' or 'nightly', not {channel!r}")
    installed_from = obj.get("installed_from")
    if installed_from is not None and not isinstance(installed_from, str):
        raise InstallRecordError(f"field 'installed_from' must be text, not {installed_from!r}")
    fabric = obj.get("fabric_manifest_version", 0)
    if isinstance(fabric, bool) or not isinstance(fabric, int) or fabric < 0:
        raise InstallRecordError(
            f"field 'fabric_manifest_version' must be a whole number, not {fabric!r}"
        )
    return InstallRecord(
        name=_text(obj, "name"),
        version=_text(obj, "version"),
        channel=channel,
        registry_url=_text(obj, "registry_url", nullable=True),
        entry=_text(obj, "entry"),
        installed_at=_text(obj, "installed_at"),
        installed_from=installed_from,
        fabric_manifest_version=fabric,
    )


def entry_escapes(entry: str) -> bool:
    """Whether an entry path leaves its version folder by its text alone: absolute (in POSIX or
    Windows spelling) or climbing above it with ``..`` (DSC-5). Symbolic links are checked on
    disk by the caller."""
    if PurePosixPath(entry).is_absolute() or PureWindowsPath(entry).is_absolute():
        return True
    if PureWindowsPath(entry).drive:
        return True
    depth = 0
    for part in re.split(r"[\\/]", entry):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def version_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """An order for version folder names (DSC-6): digit runs compare as numbers, so ``0.10``
    is newer than ``0.9``; other runs compare as text."""
    return tuple((1, int(digits)) if digits else (0, text) for digits, text in _PIECE.findall(name))
