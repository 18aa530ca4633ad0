"""The :class:`CartridgeRuntime`: the handler table, the manifest, and the entry points."""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import anyio

from cartridge_runtime.manifest import CapDef, Manifest, PoolDeclarations, PoolTable
from cartridge_runtime.protocol import Limits
from cartridge_runtime.urn import (
    ADAPTER_SELECTION_CAP,
    DISCARD_CAP,
    IDENTITY_CAP,
    CapUrn,
    UrnError,
    select_handler,
)

from ._builtin import AdapterSelectionOp, DiscardOp, IdentityOp
from ._cartridge_context import CartridgeContext, Hook
from ._context import FunctionOp, Op, SyncFunctionOp
from ._errors import SetupError
from ._frames._exit import EXIT_FAILURE, EXIT_FORCE_KILLED
from ._frames._served import OpFactory

F = TypeVar("F", bound=Callable[..., Any])

#: Requests a cartridge keeps open at once unless told otherwise: far more than any pool
#: runs, few enough that a flood of REQs costs bounded memory.
DEFAULT_MAX_OPEN_REQUESTS = 1024


@contextlib.contextmanager
def stdout_for_frames() -> Iterator[int]:
    """Keep the process's stdout for frames while CBOR mode runs: yields a private duplicate
    of file descriptor 1 for the frame writer, and meanwhile points fd 1 and ``sys.stdout``
    at stderr, so a ``print()`` in a handler (or a child process writing to its stdout) goes
    to stderr instead of corrupting the frame stream. Text a script printed before ``run()``
    and that is still in ``sys.stdout``'s buffer goes to stderr too. Both are put back after.
    """
    saved = sys.stdout
    frames_fd = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:  # no usable stderr: the noise goes nowhere rather than into the frames
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    sys.stdout = sys.stderr
    try:
        yield frames_fd
    finally:
        sys.stdout = saved
        with contextlib.suppress(OSError, ValueError):
            saved.flush()  # still stderr here
        os.dup2(frames_fd, 1)
        os.close(frames_fd)


def _canonical(urn: str) -> str:
    try:
        return str(CapUrn.parse(urn))
    except UrnError:
        return urn


class CartridgeRuntime:
    """A cartridge: a manifest plus one handler per cap.

    ::

        runtime = CartridgeRuntime(manifest)
        runtime.register_op("cap:in=media:;op=echo;out=media:", Echo)

        @runtime.op("cap:in=media:;op=shout;out=media:")
        async def shout(req: Request) -> None:
            ...

        if __name__ == "__main__":
            runtime.run()

    Identity (``cap:effect=none``), discard (``cap:out=media:void``) and adapter selection are
    registered first, as the reference does; registering the same URN text again replaces a
    handler in place.

    :param manifest: the cartridge's manifest (sent in HELLO, used for output definitions).
    :param limits: the limits this side proposes in HELLO (defaults to the protocol defaults).
    :param max_open_requests: most requests open at once (running or queued for a pool);
        beyond it a REQ is refused with ERR ``TOO_MANY_REQUESTS`` (class ``resource``), so a
        host that floods the cartridge cannot grow it without limit.
    """

    def __init__(
        self,
        manifest: Manifest,
        *,
        limits: Limits | None = None,
        max_open_requests: int = DEFAULT_MAX_OPEN_REQUESTS,
    ) -> None:
        if max_open_requests < 1:
            raise ValueError("max_open_requests must be at least 1")
        self.manifest = manifest
        self.limits = limits or Limits()
        self.max_open_requests = max_open_requests
        #: What every request shares: resources and start-up/shutdown hooks (built once).
        self.context = CartridgeContext(manifest.name)
        self._handlers: dict[str, OpFactory] = {}
        #: find_handler answers per requested cap text (cleared by register_op).
        self._found: dict[str, tuple[str, OpFactory] | None] = {}
        self.register_op(IDENTITY_CAP, IdentityOp)
        self.register_op(DISCARD_CAP, DiscardOp)
        self.register_op(ADAPTER_SELECTION_CAP, AdapterSelectionOp)
        #: The built-in registrations, which need no declaration in the manifest.
        self._builtin = {DISCARD_CAP: DiscardOp, ADAPTER_SELECTION_CAP: AdapterSelectionOp}

    def __repr__(self) -> str:
        return f"CartridgeRuntime(manifest={self.manifest.name!r}, handlers={len(self._handlers)})"

    # -- the cartridge-wide context -------------------------------------------------------

    def on_startup(self, hook: Hook) -> Hook:
        """Run ``hook(runtime.context)`` (sync or async) once before serving: load a model,
        open a pool, and ``ctx.set(KEY, it)``. Usable as a decorator."""
        return self.context.on_startup(hook)

    def on_shutdown(self, hook: Hook) -> Hook:
        """Run ``hook(runtime.context)`` once after serving ended (reverse order), also after
        a failure. Usable as a decorator."""
        return self.context.on_shutdown(hook)

    # -- registration ----------------------------------------------------------------------

    def register_op(self, cap_urn: str, op: type[Op] | OpFactory) -> None:
        """Serve ``cap_urn`` with a fresh ``op()`` per request (an :class:`Op` subclass or a
        factory returning an :class:`Op`).

        :raises ValueError: ``cap_urn`` is not a valid cap URN, or ``op`` is not callable.
        """
        try:
            CapUrn.parse(cap_urn)
        except UrnError as exc:
            raise ValueError(f"cannot register {cap_urn!r}: {exc}") from exc
        if isinstance(op, Op) or not callable(op):
            raise ValueError(
                "register_op needs an Op subclass or a factory (a fresh Op per request)"
            )
        self._handlers[cap_urn] = op
        self._found.clear()

    def op(self, cap_urn: str) -> Callable[[F], F]:
        """Decorator form: ``@runtime.op(cap)`` on ``async def handler(req) -> None`` (a plain
        ``def`` runs in a worker thread)."""

        def register(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):
                self.register_op(cap_urn, lambda: FunctionOp(fn))
            else:
                self.register_op(cap_urn, lambda: SyncFunctionOp(fn))
            return fn

        return register

    @property
    def handler_urns(self) -> list[str]:
        """The registered cap URN texts, in registration order."""
        return list(self._handlers)

    def find_handler(self, cap_urn: str) -> tuple[str, OpFactory] | None:
        """The handler serving a request for ``cap_urn``: the exact text first, then the best
        dispatchable registration (URN-18)."""
        try:
            return self._found[cap_urn]
        except KeyError:
            pass
        urns = list(self._handlers)
        index = select_handler(urns, cap_urn)
        found = None if index is None else (urns[index], self._handlers[urns[index]])
        if len(self._found) < 1024:  # bounded: a host could name endless distinct URNs
            self._found[cap_urn] = found
        return found

    def find_cap_def(self, alias_or_urn: str) -> CapDef | None:
        """The manifest's definition of a cap, by alias, URN text, or an equivalent URN."""
        return self.manifest.find_cap(alias_or_urn)

    def cap_def_for(self, request_urn: str, handler_urn: str) -> CapDef | None:
        """The definition that describes a request's outputs: the cap equal to the request, else
        the handler's own definition."""
        for urn in (request_urn, handler_urn):
            try:
                wanted = CapUrn.parse(urn)
            except UrnError:
                continue
            for cap in self.manifest.iter_caps():
                if cap.urn == str(wanted):
                    return cap
        return None

    def make_pools(self) -> PoolTable[Any]:
        """A fresh pool table: one singleton pool per registered handler, the manifest's shared
        pools, and ``all``."""
        seen: dict[str, str] = {}
        for urn in self._handlers:
            seen.setdefault(str(CapUrn.parse(urn)), urn)
        decl = self.manifest.pool_declarations
        capacities = {}
        for key, value in decl.capacities.items():
            try:
                capacities[str(CapUrn.parse(key))] = value
            except UrnError:
                capacities[key] = value  # a pool name or "all"
        return PoolTable(list(seen), PoolDeclarations(pools=decl.pools, capacities=capacities))

    def check(self) -> None:
        """Check that manifest and handlers fit together, as :meth:`run` does before it
        serves anything: every alias names one cap, every declared cap has a handler, and
        every registered handler serves a declared cap (the built-in discard and adapter
        selection handlers excepted).

        :raises SetupError: one line naming every problem found.
        """
        problems: list[str] = []
        owners: dict[str, str] = {}
        declared: set[str] = set()
        for cap in self.manifest.iter_caps():
            declared.add(_canonical(cap.urn))
            for alias in cap.aliases:
                first = owners.setdefault(alias, cap.urn)
                if first != cap.urn:
                    problems.append(f"alias {alias!r} names two caps ({first} and {cap.urn})")
            if self.find_handler(cap.urn) is None:
                problems.append(f"declared cap {cap.urn} has no handler")
        for urn, factory in self._handlers.items():
            if self._builtin.get(urn) is factory:
                continue
            if _canonical(urn) not in declared:
                problems.append(
                    f"a handler is registered for {urn}, which the manifest does not declare"
                )
        if problems:
            raise SetupError(
                f"cartridge {self.manifest.name!r} cannot start: " + "; ".join(problems)
            )

    # -- entry points ----------------------------------------------------------------------

    def run(self, argv: Sequence[str] | None = None) -> None:
        """Run as a cartridge process and exit: no arguments → CBOR frames on stdin/stdout;
        any argument → CLI mode."""
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            self.check()
        except SetupError as exc:
            print(f"cartridge: {exc}", file=sys.stderr, flush=True)
            sys.exit(EXIT_FAILURE)
        if args:
            from ._cli._mode import run_cli

            sys.exit(run_cli(self, args))
        status = anyio.run(self.serve_stdio)
        sys.stdout.flush()
        sys.stderr.flush()
        if status == EXIT_FORCE_KILLED:
            os._exit(status)  # worker threads may still run; a forced kill does not wait
        sys.exit(status)

    async def serve_stdio(self) -> int:
        """Serve CBOR mode on the process's stdin/stdout file descriptors."""
        from cartridge_runtime._plumbing import FdReceiveStream, FdSendStream
        from cartridge_runtime.protocol import tune_allocator

        tune_allocator()  # keep 256 KiB payload buffers in the heap (see protocol._alloc)
        with stdout_for_frames() as frames_fd:
            receive = FdReceiveStream(sys.stdin.fileno())
            send = FdSendStream(frames_fd)
            try:
                return await self.serve(receive, send)
            finally:
                receive.restore()
                send.restore()

    async def serve(
        self, receive: anyio.abc.ByteReceiveStream, send: anyio.abc.ByteSendStream
    ) -> int:
        """Speak Bifaci v6 as the cartridge over a pair of byte streams until the input ends.

        Returns the exit status: 0 at EOF, 1 on a handshake failure or a relay frame, 65 when
        the byte stream became untrustworthy, 137 after a CANCEL with ``force_kill``.
        """
        from ._frames._session import Session

        try:
            lifespan = self.context.lifespan()
            await lifespan.__aenter__()
        except Exception as exc:
            print(f"cartridge: a start-up hook failed: {exc!r}", file=sys.stderr, flush=True)
            return EXIT_FAILURE
        try:
            status = await Session(self, receive, send).run()
        except BaseException as exc:
            await lifespan.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        await lifespan.__aexit__(None, None, None)
        return status

    async def _invoke_local(self, cap_urn: str, inputs: list[tuple[str, bytes]], sink: Any) -> None:
        """Run one handler in-process with whole inputs, sending its emissions to ``sink``
        (CLI mode). See :mod:`cartridge_runtime.runtime` for the sink protocol.

        :raises CartridgeError: the handler failed (``OpError`` keeps its code), or no handler.
        """
        from ._cli._local import invoke_local

        await invoke_local(self, cap_urn, inputs, sink)
