"""A plain ``cartridge call``'s cartridge, started before the command's own imports.

A started engine pays neither the command's imports (the engine, anyio, asyncio: most of a
plain call's own start) nor the cartridge's start (its interpreter and imports); a plain call
pays both, one after the other. Started here first, the cartridge starts on one core while
the command imports on another, and its hello is waiting by the time the engine asks for it.
:mod:`._early_placement` hands the process to the engine, which then drives it as one it
started itself; a process the engine never takes is killed (:meth:`EarlyProcess.discard`).

Only what the engine would run itself is started: the command is the one the engine makes
of the target (a ``.py`` script with this interpreter, a ``.js`` script with ``node``, a
program given by a path), with the same pipes (enlarged where the OS allows), stdin, stdout
and stderr, the same environment and default signal handling, and no other descriptor;
the engine takes the process only when its own command for the target is the same.
Anything else (a program looked up on ``PATH``, an OS without ``posix_spawn``, a cap given
as a URN rather than a name) is left to the engine. This module imports nothing but ``os``
and ``sys`` (and ``signal`` and ``fcntl``, both small) so that the cartridge starts at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

__all__ = ("EarlyProcess", "spawn_for_call")

#: Pipe size asked for, as the engine's own pipes (the kernel caps it).
_PIPE_SIZE = 1 << 20
#: ``fcntl.F_SETPIPE_SZ`` on Linux, absent from older fcntl modules.
_F_SETPIPE_SZ = 1031


class EarlyProcess:
    """A cartridge process started before the engine, and the command's ends of its pipes.

    :ivar command: the argv it runs (compared with the engine's own for the target).
    :ivar pid: its process id.
    :ivar pidfd: a descriptor that becomes readable when it exits (its end is awaited on it;
        ``-1`` where the OS has none).
    :ivar stdin: the writing end of its stdin pipe.
    :ivar stdout: the reading end of its stdout pipe.
    :ivar stderr: the reading end of its stderr pipe.
    """

    __slots__ = ("command", "pid", "pidfd", "stderr", "stdin", "stdout", "taken")

    def __init__(
        self, command: tuple[str, ...], pid: int, pidfd: int, ends: tuple[int, int, int]
    ) -> None:
        self.command = command
        self.pid = pid
        self.pidfd = pidfd
        self.stdin, self.stdout, self.stderr = ends
        #: Whether the engine took it (it then owns the process and the descriptors).
        self.taken = False

    def __repr__(self) -> str:
        return f"EarlyProcess(pid={self.pid}, taken={self.taken})"

    def discard(self) -> None:
        """Kill and reap the process and close its descriptors, unless the engine took it."""
        if self.taken:
            return
        self.taken = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)  # SIGKILL
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        for fd in (self.stdin, self.stdout, self.stderr, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _command(target: str) -> tuple[list[str], bool] | None:
    """The argv the engine makes of ``target`` (``command_for``'s rules for a path), and
    whether its program is looked up on ``PATH``; ``None`` for what is left to the engine."""
    suffix = os.path.splitext(target)[1]
    if suffix in (".py", ".js"):
        if not os.path.isfile(target):
            return None
        return ([sys.executable, target], False) if suffix == ".py" else (["node", target], True)
    if not os.path.isfile(target):
        return None  # a program on PATH, or nothing: the engine's words for it
    bare = os.sep not in target and not (os.altsep and os.altsep in target)
    return [os.path.join(os.curdir, target) if bare else target], False


def _grow(fd: int) -> None:
    with contextlib.suppress(ImportError, OSError, ValueError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), _PIPE_SIZE)


def _inherited() -> list[int]:
    """The descriptors above stderr a spawned program would inherit (the engine's spawn
    closes them).

    :raises OSError: the list of open descriptors cannot be read.
    """
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor, now closed
                if os.get_inheritable(fd):
                    found.append(fd)
    return found


def spawn_for_call(args: Sequence[str]) -> EarlyProcess | None:
    """Start the cartridge of a plain ``cartridge call TARGET CAP`` (``args`` after
    ``call``); ``None`` when ``args`` are anything else, or the engine is to start it."""
    if len(args) != 2 or any(not arg or arg.startswith("-") for arg in args):
        return None
    if args[1].startswith("cap:"):
        # A cap URN may be refused as a usage error, and a usage error starts nothing; telling
        # needs the URN parser, whose import costs about what starting early saves.
        return None
    if not hasattr(os, "posix_spawn"):
        return None
    found = _command(args[0])
    if found is None:
        return None
    argv, on_path = found
    fds: list[int] = []
    try:
        for _ in range(3):
            fds.extend(os.pipe())
        if min(fds) <= 2:  # a standard descriptor was closed: the pipes took its place
            raise OSError("a standard descriptor is closed")
        in_r, in_w, out_r, out_w, err_r, err_w = fds
        _grow(in_w)
        _grow(out_w)
        import signal

        actions = [
            (os.POSIX_SPAWN_DUP2, in_r, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited()),
        ]
        spawn = os.posix_spawnp if on_path else os.posix_spawn
        # Python ignores SIGPIPE and SIGXFSZ; a spawned program gets their defaults back.
        pid = spawn(
            argv[0],
            argv,
            os.environ,
            file_actions=actions,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        return None
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    opener = getattr(os, "pidfd_open", None)
    try:
        pidfd = opener(pid) if opener is not None else -1
    except OSError:  # no pidfd here (an old kernel, a sandbox): its end is polled for
        pidfd = -1
    return EarlyProcess(tuple(argv), pid, pidfd, (in_w, out_r, err_r))
