"""A cartridge's stderr: appended to a log file (rotated at a size), its tail kept in memory
for the errors that name it."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterable
from pathlib import Path

import anyio

__all__ = ("StderrLog",)

log = logging.getLogger("cartridge_runtime.engine")


class StderrLog:
    """The stderr of one instance (see the module docstring).

    :param path: the log file (``NAME.stderr.log``); a full one becomes ``NAME.stderr.log.1``.
    :param tail_chars: characters of the end kept in :attr:`tail`.
    :param max_bytes: the size at which the file is rotated (``None``: never).
    """

    def __init__(self, path: Path, tail_chars: int, max_bytes: int | None) -> None:
        self.path = path
        self._limit = tail_chars
        self._cap = max_bytes
        #: The last ``tail_chars`` characters written.
        self.tail = ""
        self._stdout_lines = 0
        #: Set once the stream ended (or there was none).
        self.done = anyio.Event()

    def add_stdout_line(self, name: str, line: bytes) -> None:
        """A line cartridge ``name`` printed on stdout before its first frame: kept with its
        stderr (marked ``stdout:``), with one warning for the first."""
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if not self._stdout_lines:
            log.warning(
                "%s printed text on stdout before its first frame, taken as its log "
                "(logs belong on stderr): %r",
                name,
                text,
            )
        self._stdout_lines += 1
        entry = f"stdout: {text}\n"
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as logfile:
            logfile.write(entry)
        tail = self.tail + entry
        self.tail = tail[-self._limit :] if len(tail) > self._limit else tail

    async def run(self, stderr: AsyncIterable[bytes] | None) -> None:
        """Task body: copy ``stderr`` to the log until it ends."""
        if stderr is None:
            self.done.set()
            return
        limit = self._limit
        cap = self._cap
        logfile = None
        try:
            # A local log file, written in line-sized blocks: not worth a thread hop.
            logfile = open(self.path, "ab")  # noqa: ASYNC230, SIM115
            written = logfile.tell()
            async for block in stderr:
                if cap is not None and written + len(block) > cap and written:
                    # Rotate: the full file becomes NAME.1 (replacing an older one).
                    logfile.close()
                    os.replace(self.path, f"{self.path}.1")
                    logfile = open(self.path, "ab")  # noqa: ASYNC230, SIM115
                    written = 0
                logfile.write(block)
                logfile.flush()
                written += len(block)
                tail = self.tail + block.decode("utf-8", "replace")
                self.tail = tail[-limit:] if len(tail) > limit else tail
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            if logfile is not None:
                logfile.close()
            self.done.set()
