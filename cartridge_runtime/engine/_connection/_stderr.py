"""A cartridge's stderr: appended to a log file (rotated at a size), its tail kept in memory
for the errors that name it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterable
from pathlib import Path

import anyio

__all__ = ("StderrLog",)


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
        #: Set once the stream ended (or there was none).
        self.done = anyio.Event()

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
