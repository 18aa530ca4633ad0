"""Start-up of a cartridge connection: HELLO, identity check, manifest, POLICY.

Each step runs under ``EngineConfig.step_timeout``; a step that fails (no answer, a bad frame,
a manifest that breaks a rule, the process ending) fails the start-up with a
:class:`SpawnFailed` naming the step and the cartridge's stderr tail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from .. import protocol as P
from ..protocol import Frame, frames
from ._pools import PoolGate

if TYPE_CHECKING:
    from ._conn import Connection


async def _next_frame(conn: Connection, step: str) -> Frame:
    try:
        return await conn._startup_rx.receive()
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        raise _StartupAbort(step, conn._death_reason) from None


async def run_startup(conn: Connection) -> None:
    """Run the start-up steps; on success the connection is ``ready``, else ``failed``."""
    from ..manifest import Manifest, ManifestError, ManifestRuleError

    step = "hello"
    timeout = conn.config.step_timeout
    try:
        with anyio.fail_after(timeout):
            conn.send(frames.hello(conn.config.limits))
            hello = P.accept_cartridge_hello(await _next_frame(conn, step), conn.config.limits)
        conn.limits = hello.limits
        conn._decoder.max_frame = hello.limits.max_frame
        step = "identity"
        check = P.IdentityCheck()
        with anyio.fail_after(timeout):
            for f in check.frames():
                conn.send(f)
            while not check.receive(await _next_frame(conn, step)):
                pass
        step = "manifest"
        try:
            manifest = Manifest.from_json(hello.manifest)
            manifest.validate()
        except ManifestRuleError as exc:
            conn._fail_start(step, f"manifest breaks {exc}", exc.rule)
            return
        except ManifestError as exc:
            conn._fail_start(step, f"manifest is invalid: {exc}")
            return
        step = "policy"
        with anyio.fail_after(timeout):
            conn.send(frames.policy(conn.config.policy))
            await conn.drain()
    except TimeoutError:
        await _settle_stderr(conn)
        conn._fail_start(step, f"start-up step {step!r} got no answer within {timeout:g} s")
        return
    except _StartupAbort as exc:
        await _settle_stderr(conn)
        rc = conn.exit_description
        conn._fail_start(
            exc.step, f"start-up step {exc.step!r} failed: the cartridge {exc.reason} ({rc})"
        )
        return
    except P.ProtocolError as exc:
        await _settle_stderr(conn)
        conn._fail_start(step, f"start-up step {step!r} failed: {exc}")
        return
    conn.manifest = manifest
    conn.caps = [cap.urn for cap in manifest.iter_caps()]
    conn.gate = PoolGate(hello.pools)
    conn.state = "ready"
    conn._startup_rx.close()
    # Frames that raced in behind the identity echo (CREDIT, LOG) are routed normally.
    conn.started.set()


async def _settle_stderr(conn: Connection) -> None:
    """Give a failing cartridge a moment to finish writing its stderr."""
    proc = conn.process
    ended = False
    if proc is not None:
        with anyio.move_on_after(0.2):
            await proc.wait()
            ended = True
    with anyio.move_on_after(0.2 if ended else 0.05):
        await conn._stderr_done.wait()


class _StartupAbort(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(reason)
        self.step = step
        self.reason = reason or "ended"
