"""The kit's own transport: one target process driven through raw frames.

Deliberately independent of the runtime and the engine: the kit must be able to write
anything (malformed bodies, lying length prefixes, frames out of order), so it writes bytes
and reads frames with nothing in between but the sans-IO codec. Two daemon threads drain the
target's stdout (split into frames as they arrive) and stderr; every wait takes a deadline
so a silent or hung target fails the check it is in instead of hanging the kit.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

import attrs
import cbor2

from ..protocol import (
    HARD_FRAME_CAP,
    PREFIX_LEN,
    Frame,
    FrameType,
    MessageId,
    ProtocolError,
    decode_body,
    encode_frame,
    map_to_frame,
)
from ._byteform import byte_form_findings

__all__ = (
    "Received",
    "Session",
    "TargetGone",
    "WaitTimeout",
    "kill_group",
    "run_capture",
    "run_cli",
    "target_command",
)


class WaitTimeout(Exception):
    """A wait for the target ran past its deadline."""


class TargetGone(Exception):
    """The target closed its stdout (or wrote something undecodable) during a wait."""


def target_command(target: str | os.PathLike[str] | Sequence[str]) -> list[str]:
    """The argv that runs ``target``, as a host starts it (HST-1): a ``.py`` script runs
    under this interpreter, a ``.js`` script under ``node``, a bare name that is a file in
    the current folder as ``./name``, anything else directly; a sequence is taken as a
    ready argv."""
    if not isinstance(target, str | os.PathLike):
        return [str(part) for part in target]
    path = os.fspath(target)
    if path.endswith(".py"):
        return [sys.executable, path]
    if path.endswith(".js"):
        return ["node", path]
    if os.sep not in path and os.path.isfile(path):
        return [os.path.join(os.curdir, path)]
    return [path]


@attrs.frozen(kw_only=True)
class Received:
    """One frame read from the target, with the body size as it arrived."""

    frame: Frame
    body_len: int
    index: int
    invalid: str | None = None  #: why the strict decoder refused it (meta rules), if it did
    #: ``(rule, detail)`` of the byte-form SHOULD rules (FRM-17..19) the body breaks.
    form: tuple[tuple[str, str], ...] = ()


_EOF = object()

#: Most text taken before the first frame, as a host takes it (HST-22); the rest is
#: judged as frames.
MAX_LEADING_TEXT = 64 * 1024
#: First bytes of a line of text (tab, LF, CR, printable ASCII, UTF-8 lead bytes); a frame
#: under 16 MiB starts with 0x00.
_TEXT_START = frozenset((9, 10, 13, *range(0x20, 0x7F), *range(0xC2, 0xF5)))
#: Characters of stray text quoted in a diagnostic.
_QUOTE_CHARS = 60


def _stray_text(buf: bytes | bytearray) -> str | None:
    """Words for bytes that should be a frame but look like text (as the engine words them),
    quoting their first line; ``None`` when they do not look like text."""
    head = bytes(buf[:PREFIX_LEN])
    if len(head) < PREFIX_LEN or not all(b in _TEXT_START for b in head):
        return None
    line = bytes(buf).split(b"\n", 1)[0].decode("utf-8", "replace")
    shown = "".join(c if c.isprintable() else " " for c in line).strip()
    more = "..." if len(shown) > _QUOTE_CHARS else ""
    return (
        f"wrote text on stdout instead of a frame, starting with {shown[:_QUOTE_CHARS]!r}{more} "
        "(a print() to stdout, or logs that belong on stderr?)"
    )


def _lenient_decode(body: bytes) -> Frame | None:
    """The frame in ``body`` without the per-type meta checks, or None when even the
    envelope (one CBOR map with valid key types) is broken."""
    fp = io.BytesIO(body)
    try:
        m = cbor2.CBORDecoder(fp).decode()
        if fp.tell() != len(body):
            return None
        return map_to_frame(m, validate=False)
    except Exception:
        return None


class Session:
    """One running target process plus everything it wrote.

    ``received`` keeps every frame in arrival order (the audit reads it); ``inbox`` is the
    queue checks consume. ``decode_error`` is set when the target wrote bytes that do not
    decode as a frame (the audit reports it; waits then see the stream as ended).
    """

    def __init__(self, argv: Sequence[str], *, args: Sequence[str] = (), label: str = "") -> None:
        self.argv = [*argv, *args]
        self.label = label
        self.received: list[Received] = []
        self.sent: list[Frame] = []
        self.sent_bytes = 0
        self.decode_error: str | None = None
        #: Lines of text the target wrote on stdout before its first frame (FRM-25).
        self.stdout_text: list[str] = []
        self.stdout_eof = False
        self._inbox: queue.Queue[object] = queue.Queue()
        self._stderr = bytearray()
        self._lock = threading.Lock()
        self._killed = False
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env=env,
            start_new_session=True,  # its own process group: kill() reaches grandchildren
        )
        self._out_thread = threading.Thread(target=self._read_stdout, daemon=True)
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._out_thread.start()
        self._err_thread.start()

    # -- reading -------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        buf = bytearray()
        stream = self.proc.stdout
        try:
            while True:
                data = stream.read(65536)
                if not data:
                    break
                buf += data
                if not self.received and not self._take_leading_text(buf):
                    continue  # a line of text still open: wait for its end
                while len(buf) >= PREFIX_LEN:
                    size = int.from_bytes(buf[:PREFIX_LEN], "big")
                    if size > HARD_FRAME_CAP:
                        self._fail(
                            _stray_text(buf) or f"length prefix {size} above the 16 MiB hard cap"
                        )
                        return
                    if len(buf) < PREFIX_LEN + size:
                        break
                    body = bytes(buf[PREFIX_LEN : PREFIX_LEN + size])
                    del buf[: PREFIX_LEN + size]
                    invalid: str | None = None
                    form: tuple[tuple[str, str], ...] = ()
                    try:
                        frame = decode_body(body)
                        form = byte_form_findings(frame, body)
                    except ProtocolError as exc:
                        lenient = _lenient_decode(body)
                        if lenient is None:
                            self._fail(f"undecodable frame from the target: {exc}")
                            return
                        frame, invalid = lenient, str(exc)
                    with self._lock:
                        rec = Received(
                            frame=frame,
                            body_len=size,
                            index=len(self.received),
                            invalid=invalid,
                            form=form,
                        )
                        self.received.append(rec)
                    self._inbox.put(rec)
            if buf and not self.received and buf[0] in _TEXT_START:
                self.stdout_text.append(bytes(buf).decode("utf-8", "replace"))
            elif buf:
                self._fail(
                    _stray_text(buf) or f"stdout ended inside a frame ({len(buf)} stray bytes)"
                )
                return
        except (OSError, ValueError):
            pass
        self.stdout_eof = True
        self._inbox.put(_EOF)

    def _take_leading_text(self, buf: bytearray) -> bool:
        """Before the first frame, move whole lines of text from ``buf`` to
        :attr:`stdout_text` (FRM-25: a host takes them as the cartridge's log); ``False``
        while a line of text is still open (more input is needed)."""
        taken = sum(map(len, self.stdout_text))
        while buf and buf[0] in _TEXT_START and taken < MAX_LEADING_TEXT:
            end = buf.find(b"\n")
            if end < 0:
                return len(buf) + taken >= MAX_LEADING_TEXT  # past the limit: frames' turn
            line = bytes(buf[: end + 1])
            del buf[: end + 1]
            self.stdout_text.append(line.decode("utf-8", "replace"))
            taken += len(line)
        return True

    def _fail(self, message: str) -> None:
        self.decode_error = message
        self.stdout_eof = True
        self._inbox.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            while True:
                data = self.proc.stderr.read(65536)
                if not data:
                    return
                with self._lock:
                    self._stderr += data
                    if len(self._stderr) > 65536:
                        del self._stderr[:-32768]
        except (OSError, ValueError):
            return

    @property
    def stderr_text(self) -> str:
        """The tail of what the target wrote to stderr."""
        with self._lock:
            return self._stderr.decode("utf-8", "replace")

    def recv(self, deadline: float) -> Frame:
        """The next frame, waiting until ``deadline`` (a ``time.monotonic()`` value).

        :raises WaitTimeout: nothing arrived in time.
        :raises TargetGone: the target's stdout ended (or became undecodable).
        """
        timeout = deadline - time.monotonic()
        try:
            item = (
                self._inbox.get(timeout=max(0.0, timeout))
                if timeout > 0
                else self._inbox.get_nowait()
            )
        except queue.Empty:
            raise WaitTimeout("no frame from the target in time") from None
        if item is _EOF:
            self._inbox.put(_EOF)  # later waits see the end too
            raise TargetGone(self.decode_error or "the target closed its stdout")
        assert isinstance(item, Received)
        return item.frame

    def expect(
        self,
        match: Callable[[Frame], bool],
        deadline: float,
        *,
        on_other: Callable[[Frame], None] | None = None,
    ) -> Frame:
        """Read until a frame satisfies ``match``; other frames go to ``on_other``."""
        while True:
            frame = self.recv(deadline)
            if match(frame):
                return frame
            if on_other is not None:
                on_other(frame)

    def drain(self, quiet: float) -> list[Frame]:
        """Frames that arrive until the target has been quiet for ``quiet`` seconds."""
        out: list[Frame] = []
        while True:
            try:
                out.append(self.recv(time.monotonic() + quiet))
            except (WaitTimeout, TargetGone):
                return out

    # -- writing -------------------------------------------------------------------------

    def send(self, *frames: Frame) -> None:
        """Encode and write frames (no size limit: the kit may send what it likes)."""
        data = b"".join(encode_frame(f, HARD_FRAME_CAP) for f in frames)
        self.sent.extend(frames)
        self.write(data)

    def write(self, data: bytes) -> None:
        """Write raw bytes; a closed pipe is ignored (the target may have exited)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            self.sent_bytes += len(data)
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close_stdin(self) -> None:
        """Send EOF on the target's stdin."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.close()

    # -- lifetime ------------------------------------------------------------------------

    def wait_exit(self, deadline: float) -> int | None:
        """The exit status, or None when the process is still running at ``deadline``."""
        try:
            return self.proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the process and everything it started (its process group), reap it and
        release the pipes (idempotent: the group is signalled once, so a later call never
        reaches a recycled process id)."""
        with self._lock:
            first, self._killed = not self._killed, True
        if first:
            kill_group(self.proc)
        for pipe in (self.proc.stdin,):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self._out_thread.join(timeout=2)
        self._err_thread.join(timeout=2)
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def frames_of(self, rid: MessageId) -> list[Frame]:
        """Every frame received so far whose id is ``rid``."""
        with self._lock:
            return [r.frame for r in self.received if r.frame.id == rid]

    def snapshot(self) -> list[Received]:
        """A copy of everything received so far."""
        with self._lock:
            return list(self.received)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``start_new_session``), so
    that a target's own children go too, then reap ``proc``."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # also when the leader is gone but not its group
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # the kernel did not reap it
        proc.wait(timeout=5)


def run_capture(argv: Sequence[str], timeout: float) -> tuple[int | None, bytes]:
    """Run ``argv`` with stdin closed; ``(exit status or None on timeout, stdout)``. The
    whole process group is killed and reaped on a timeout."""
    rc, out, _ = run_cli(argv, timeout)
    return rc, out


def run_cli(
    argv: Sequence[str], timeout: float, stdin: bytes | None = None
) -> tuple[int | None, bytes, bytes]:
    """Run ``argv`` (a CLI-mode invocation) with ``stdin`` as its input (``None``: closed);
    ``(exit status or None on timeout, stdout, stderr)``. The whole process group is killed
    and reaped on a timeout."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        with contextlib.suppress(OSError, ValueError):
            proc.communicate(timeout=1)
        return None, b"", b""
    finally:
        if proc.poll() is None:
            kill_group(proc)
    kill_group(proc)  # a child it left running in its group
    return proc.returncode, out, err


def is_response_to(rid: MessageId) -> Callable[[Frame], bool]:
    """Predicate: a flow frame answering request ``rid``."""
    return lambda f: f.id == rid and f.frame_type.is_flow


FLOW_TERMINALS = (FrameType.END, FrameType.ERR)
