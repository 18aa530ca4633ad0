"""A plain ``cartridge call`` starts its cartridge before its own imports, and the engine takes
that process as one it started: the same command, pipes, descriptors and signal handling; a
process the engine does not take is killed; anything else is left to the engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.cli._early import EarlyProcess, spawn_for_call
from cartridge_runtime.cli._early_placement import EarlyPlacement
from cartridge_runtime.engine import Engine, LaunchSpec, Subprocess

INTEROP = str(Path(__file__).resolve().parents[2] / "cartridges" / "interop.py")
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def _gone(pid: int) -> bool:
    """Whether ``pid`` is no longer a live process (reaped, or a zombie of another parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "args",
    [
        [INTEROP],  # no CAP
        [INTEROP, "echo", "extra"],
        [INTEROP, "--verbose"],
        [INTEROP, ""],
        ["/no/such/cartridge.py", "echo"],
        ["interop-on-path-maybe", "echo"],  # a bare name: looked up by the engine
        [str(Path(INTEROP).parent), "echo"],  # a directory
        [INTEROP, "cap:echo"],  # a cap URN: checked before anything starts
        [INTEROP, "cap:in=x;;"],
    ],
)
def test_nothing_starts_early_for_anything_but_a_plain_call_of_a_file(args: list[str]) -> None:
    assert spawn_for_call(args) is None


def test_an_early_process_not_taken_is_killed_and_reaped() -> None:
    early = spawn_for_call([INTEROP, "echo"])
    assert early is not None
    assert early.command == (sys.executable, INTEROP)
    early.discard()
    assert early.taken
    assert _gone(early.pid)
    with pytest.raises(OSError):
        os.fstat(early.stdout)  # its descriptors are closed
    early.discard()  # twice is harmless


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_the_early_process_inherits_no_descriptor_and_gets_default_signals(
    tmp_path: Path,
) -> None:
    script = tmp_path / "probe.sh"
    script.write_text(
        "#!/bin/sh\nls /proc/$$/fd >&2\necho --- >&2\ngrep SigIgn /proc/$$/status >&2\n"
    )
    script.chmod(0o755)
    opened = os.open(os.devnull, os.O_RDONLY)
    leaked = os.dup2(opened, 77, inheritable=True)
    try:
        early = spawn_for_call([str(script), "echo"])
    finally:
        os.close(leaked)
        os.close(opened)
    assert early is not None
    assert early.command == (str(script),)
    try:
        os.close(early.stdin)
        early.stdin = -1
        fds, _, ignored = _read_all(early.stderr).decode().partition("---")
    finally:
        early.discard()
    assert "77" not in fds.split()
    assert {"0", "1", "2"} <= set(fds.split())
    mask = int(ignored.split()[-1], 16)
    assert not mask & (1 << (signal.SIGPIPE - 1)), "SIGPIPE is left ignored"


def test_the_placement_hands_over_the_early_process_once_then_starts_new_ones() -> None:
    early = spawn_for_call([INTEROP, "echo"])
    assert early is not None

    async def run() -> tuple[int | None, int | None, bytes]:
        async with Engine() as engine:
            name = engine.add_cartridge(INTEROP, placement=EarlyPlacement(early))
            await engine.start(name)
            first = engine.status()[0].pid
            result = await engine.call("cap:echo", [("media:", b"ping")])
            await engine.stop(name)
            await engine.start(name)  # a process of its own
            second = engine.status()[0].pid
            return first, second, result.data

    first, second, data = anyio.run(run)
    assert early.taken
    assert first == early.pid
    assert second not in (None, early.pid)
    assert data == b"ping"
    assert _gone(early.pid)


def test_a_launch_of_another_command_kills_the_early_process_and_starts_its_own() -> None:
    early = spawn_for_call([INTEROP, "echo"])
    assert early is not None
    placement = EarlyPlacement(early)

    async def run() -> int | None:
        other = Subprocess().resolve([sys.executable, "-c", "pass"])
        spec = LaunchSpec(name="x", replica=0, target=other)
        async with anyio.create_task_group() as tg:
            instance = await placement.launch(spec, tg)
            await instance.wait()
            await instance.aclose()
        return instance.pid

    pid = anyio.run(run)
    assert early.taken and _gone(early.pid)
    assert pid != early.pid


def test_the_instance_reports_its_end_as_the_engine_s_own_do() -> None:
    early = spawn_for_call([INTEROP, "echo"])
    assert early is not None
    placement = EarlyPlacement(early)

    async def run() -> tuple[str, str, int | None]:
        spec = LaunchSpec(name="x", replica=0, target=Subprocess().resolve(INTEROP))
        async with anyio.create_task_group() as tg:
            instance = await placement.launch(spec, tg)
            before = instance.describe_exit()
            instance.kill()
            async with anyio.create_task_group() as waiters:  # two waiters at once
                waiters.start_soon(instance.wait)
                waiters.start_soon(instance.wait)
            await instance.aclose()
        return before, instance.describe_exit(), instance.returncode

    before, after, code = anyio.run(run)
    assert before == "still running"
    assert code == -signal.SIGKILL
    assert after == "killed by signal 9 (SIGKILL)"


def test_a_plain_call_starts_its_cartridge_before_it_imports_the_engine(tmp_path: Path) -> None:
    # The cartridge notes when it started; the command notes when it began importing the
    # engine. Started by the engine, the cartridge would start after that.
    started = tmp_path / "started"
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            f"""
            import time
            open({str(started)!r}, "w").write(repr(time.monotonic()))
            exec(compile(open({INTEROP!r}).read(), {INTEROP!r}, "exec"))
            """
        )
    )
    driver = textwrap.dedent(
        f"""
        import sys, time
        class Note:
            at = None
            def find_spec(self, name, path=None, target=None):
                if name == "cartridge_runtime.engine._engine" and Note.at is None:
                    Note.at = time.monotonic()
        sys.meta_path.insert(0, Note())
        sys.argv = ["cartridge", "call", {str(probe)!r}, "echo"]
        from cartridge_runtime.cli import main
        try:
            main()
        finally:
            sys.stderr.write(f"engine {{Note.at!r}}\\n")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", driver], input=b"ping", capture_output=True, timeout=120
    )
    assert done.stdout == b"ping", done.stderr
    engine_at = float(done.stderr.decode().split("engine ")[-1])
    assert float(started.read_text()) < engine_at


def test_a_usage_error_found_after_the_early_start_leaves_no_process(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    script = tmp_path / "slow.py"
    script.write_text(
        f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, "call", str(script), "cap:in=media:;out"], capture_output=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.startswith(b"error: "), done.stderr
    assert b"Traceback" not in done.stderr
    assert time.monotonic() - started < 60
    if marker.exists():  # it got as far as starting: it is gone now
        pid = int(marker.read_text() or "0")
        assert pid and _gone(pid)


def test_with_a_standard_descriptor_closed_the_engine_starts_the_cartridge() -> None:
    driver = textwrap.dedent(
        f"""
        import os, sys
        os.close(0)
        from cartridge_runtime.cli._early import spawn_for_call
        print(spawn_for_call([{INTEROP!r}, "echo"]))
        """
    )
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, timeout=60)
    assert done.stdout == b"None\n", done.stderr


def test_an_early_process_is_an_early_process() -> None:
    assert "taken=False" in repr(EarlyProcess(("x",), 1, -1, (-1, -1, -1)))


def test_without_a_pidfd_the_end_is_still_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    early = spawn_for_call([INTEROP, "echo"])
    assert early is not None
    assert early.pidfd == -1
    placement = EarlyPlacement(early)

    async def run() -> int | None:
        spec = LaunchSpec(name="x", replica=0, target=Subprocess().resolve(INTEROP))
        async with anyio.create_task_group() as tg:
            instance = await placement.launch(spec, tg)
            instance.stdin.close()  # end of input: the cartridge exits on its own
            with anyio.fail_after(30):
                await instance.wait()
            await instance.aclose()
        return instance.returncode

    assert anyio.run(run) == 0
    assert _gone(early.pid)
