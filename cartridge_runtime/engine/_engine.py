"""The engine: cartridges by name, routing by cap URN, calls, peer calls, health, shutdown.

Routing
-------
A call's cap goes to the cartridge that serves it by the runtime's own dispatch rule; **ties
go to the cartridge added first**, and cartridges whose caps are unknown are started, in the
order added, until one matches (see :mod:`._routing`, whose :class:`~._routing.CapRouter`
also routes peer calls).

Placements and replicas
-----------------------
Where a cartridge runs is its placement (:mod:`._placement`: a local subprocess by default,
or a runtime in this process); routing never asks which. A cartridge added with
``replicas=N`` runs N instances (:mod:`._replicas`): a call, or a peer call, goes to the
least-loaded ready one. Each choice also starts, in the background, every replica that is
not running (never started, or dead), so a replica that died is respawned by the calls
after its death while the others serve them. When none is ready, the call waits for the
first replica's start-up.

Supervision
-----------
An engine left running for days keeps itself healthy (:mod:`._supervision`): a call that
receives no frame for its activity timeout is cancelled with ``TIMEOUT``; an instance past its
cartridge's ``memory_limit`` is killed and its calls fail with ``OOM_KILLED``; an instance
without calls for its ``idle_timeout`` is stopped; ``retry=`` tries a failed call again with
backoff; :meth:`Engine.replace_cartridge` and :meth:`Engine.remove_cartridge` drain the calls in
flight before retiring instances. :meth:`Engine.subscribe` reports all of it as events.

Ids
---
Every request the engine sends a cartridge (its own calls and forwarded peer calls) gets a
fresh UUID request id and a small unsigned-integer routing id (xid 1, 2, 3... per process).
The cartridge copies the xid back; routing is by request id, the xid is checked and a missing
one counted as a protocol error.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import attrs

from ..protocol import (
    Frame,
    NetworkPolicy,
    frames,
    hold_allocator,
    release_allocator,
)
from ._call import Inputs, normalize_inputs
from ._cartridges import Cartridges
from ._config import DEFAULT_WINDOW, EngineConfig
from ._connection._counters import Counters
from ._connection._health import set_capacities
from ._errors import CallError, EngineError
from ._events import Result
from ._graphs._hub import GrowHub
from ._hosts import Hosts
from ._life import EngineLife
from ._observe import CallObserver
from ._opening import CallOpener
from ._peer import PeerEnd
from ._peer_requests import PeerRequests
from ._placements._command import describe_returncode
from ._placements._seam import Placement
from ._replica_start import ReplicaStarter
from ._replicas import CartridgeSlot
from ._response import CallContext, CallOptions
from ._routing import CapRouter
from ._status import CartridgeStatus, EngineStats, cartridge_status
from ._supervision._activity import check_limit
from ._supervision._lifecycle import (
    CallRetried,
    EventHub,
    Subscription,
)
from ._supervision._retry import Retry
from ._supervision._watchdog import Watchdog

log = logging.getLogger("cartridge_runtime.engine")

#: The options of a call made without any.
_PLAIN = CallOptions()

#: Times one call is routed again when the instance it was given stopped under it (retired
#: or idle-stopped between routing and sending).
_REROUTES = 4

if TYPE_CHECKING:
    from ..discovery import Discovery
    from ..machine import Machine, MachineSource
    from ..manifest import Manifest
    from ..planner import Plan, SourceLike
    from ..relay import HostView
    from ..urn import MediaUrn
    from ._graphs._session import Graph
    from ._machines._api import MachineRun
    from ._machines._cache import CacheStore
    from ._machines._events import MachineResult
    from ._machines._records import RunRecorder


class Engine:
    """Starts cartridges, routes calls to them, and keeps them healthy. Use as::

        async with Engine() as engine:
            engine.add_cartridge("cartridges/interop.py")
            result = await engine.call("cap:...", [("media:", b"hi")])

    :param config: an :class:`EngineConfig`; keyword arguments override its fields.
    """

    def __init__(self, config: EngineConfig | None = None, **overrides: Any) -> None:
        config = config or EngineConfig()
        self.config = attrs.evolve(config, **overrides) if overrides else config
        self._slots: dict[str, CartridgeSlot] = {}
        self._counters = Counters()
        #: Observers of every call (``add_observer``); empty: calls record nothing extra.
        self._observers: list[CallObserver] = []
        self._life = EngineLife()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._holds_allocator = False
        self._log_dir: Path | None = None
        #: Replaced or removed cartridges whose calls drain.
        self._draining: list[CartridgeSlot] = []
        self._hub = EventHub()
        self._watchdog = Watchdog(
            config=self.config,
            slots=self._supervised,
            hub=self._hub,
            other_calls=self._host_calls,
        )
        self._starter = ReplicaStarter(
            config=self.config,
            counters=self._counters,
            on_peer_request=self._on_peer_request,
            on_started=self._caps_changed,
            watchdog=self._watchdog,
        )
        self._router = CapRouter(self._slots, self._starter, self._counters)
        self._cartridges = Cartridges(
            config=self.config,
            slots=self._slots,
            draining=self._draining,
            starter=self._starter,
            router=self._router,
            hub=self._hub,
            watchdog=self._watchdog,
        )
        #: The graph calls in flight, for growth from inside a cartridge (``graph()``).
        self._grow_hub = GrowHub()
        #: Cartridge hosts attached to this engine (``add_host``), routed to after its own.
        self._hosts = Hosts(self._counters, self._hub, self.config.policy or NetworkPolicy.OFFLINE)
        self._opener = CallOpener(
            config=self.config,
            life=self._life,
            slots=self._slots,
            router=self._router,
            starter=self._starter,
            hosts=self._hosts,
            watchdog=self._watchdog,
            observers=self._observers,
        )
        self._peers = PeerRequests(
            life=self._life,
            slots=self._slots,
            router=self._router,
            grow_hub=self._grow_hub,
            watchdog=self._watchdog,
            activity_limit=self._opener.activity_limit,
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        # Keep 256 KiB payload buffers in the heap instead of an mmap/munmap per chunk, while
        # this engine runs (glibc's defaults come back after the last engine).
        self._holds_allocator = self.config.tune_allocator and hold_allocator()
        if self.config.log_dir is not None:
            self._log_dir = Path(self.config.log_dir)
            self._log_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="cartridge-engine-")
            self._log_dir = Path(self._tmp.name)
        self._life.tg = anyio.create_task_group()
        await self._life.tg.__aenter__()
        self._starter.run_in(self._life.tg, self._log_dir)
        await self._life.tg.start(self._watchdog.run)
        self._hosts.run_in(self._life.tg)
        for slot in self._slots.values():
            if slot.eager:
                for replica in slot.replicas:
                    self._starter.start_soon(slot, replica)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        await self.aclose()
        assert self._life.tg is not None
        self._life.tg.cancel_scope.cancel()
        try:
            # The block's own exception goes on as it is (not wrapped in an ExceptionGroup):
            # the engine's tasks were only cancelled, which is no news to the caller.
            await self._life.tg.__aexit__(None, None, None)
            return None
        finally:
            self._life.tg = None
            self._starter.run_in(None, None)
            self._hosts.run_in(None)
            if self._holds_allocator:
                self._holds_allocator = False
                release_allocator()
            if self._tmp is not None:
                # The private log directory lives as long as the engine; set
                # ``EngineConfig.log_dir`` to keep the stderr logs afterwards.
                self._tmp.cleanup()
                self._tmp = None

    async def aclose(self) -> None:
        """Shut every cartridge down (stdin closed, grace period, then kill)."""
        if self._life.closed:
            return
        self._life.closed = True
        self._starter.close()
        conns = [r.conn for s in self._supervised() for r in s.replicas if r.conn is not None]
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for conn in conns:
                    tg.start_soon(conn.close, self.config.shutdown_grace)

    async def discover(
        self,
        root: str | os.PathLike[str],
        *,
        cache: str | os.PathLike[str] | Literal[False] | None = None,
        refresh: bool = False,
    ) -> Discovery:
        """Add every cartridge installed under ``root`` (a folder of cartridge scripts and
        executables, or installed version folders with a ``cartridge.json``), each under its
        manifest's name with its manifest known, so calls route to it and plans read its caps
        before it ever starts. Manifests come from the cache by content digest; a cartridge
        the cache does not hold is started once to read it (DSC-1 .. DSC-12).

        :param cache: the manifest cache folder; ``None``: the per-user one; ``False``: none.
        :param refresh: start every cartridge even when the cache holds it.
        :returns: what was found (and added) and what was refused, with the reasons.
        :raises RootNotFound: ``root`` does not exist or is not a folder.
        """
        found = await discover(root, cache=cache, refresh=refresh)
        for cartridge in found.found:
            cartridge.add_to(self)
        return found

    async def plan(
        self,
        source: SourceLike,
        target: str | MediaUrn,
        *,
        media: str | MediaUrn | None = None,
        is_sequence: bool | None = None,
        max_depth: int | None = None,
        limit: int | None = None,
    ) -> list[Plan]:
        """The ranked ways to turn ``source`` into ``target`` over the caps of every cartridge
        added, best first (none is an empty list), those that need a side argument
        (:attr:`Plan.needs`) after the complete ones; ``plans[0].machine`` runs with
        :meth:`run_machine`. Cartridges whose manifest is known (given to
        :meth:`add_cartridge`) are not started; the others are, only to read it.

        :param source: a media URN; a file, folder or glob, or a list of them (their media is
            detected from the extension and a bounded look at the content); or ``bytes``.
        :param media: the source's declared media URN (wins over detection; needed for bytes).
        :param is_sequence: whether the source is a sequence of values (default: a URN or bytes
            is one value; several files or a folder are a sequence).
        :param max_depth: the depth the search goes to (``None``: the planner's
            ``DEFAULT_MAX_DEPTH``, 10).
        :param limit: how many paths it gathers (``None``: the planner's ``DEFAULT_LIMIT``, 20).
        :raises DefinitionError: bytes without ``media``.
        :raises InputError: a file that cannot be found or read.
        :raises PlannerError: a target that is not a media URN, a bad depth or limit.
        :raises SpawnFailed: a cartridge whose manifest is not known failed to start.
        """
        from ..planner import DEFAULT_LIMIT, DEFAULT_MAX_DEPTH, planning_source
        from ._plans import plan_on
        from ._relay._switch import WithHosts

        query = await anyio.to_thread.run_sync(
            lambda: planning_source(source, media=media, is_sequence=is_sequence)
        )
        both = WithHosts(self, self._hosts.switch())
        return await plan_on(
            both,
            both.names(list(self._slots)),
            query,
            target,
            max_depth=DEFAULT_MAX_DEPTH if max_depth is None else max_depth,
            limit=DEFAULT_LIMIT if limit is None else limit,
        )

    async def machine(
        self,
        text_or_path: str | os.PathLike[str],
        *,
        source: MachineSource | None = None,
    ) -> Machine:
        """Resolve machine notation against the caps of every cartridge added, starting those
        not running only to read their manifests (no call is made).

        :param text_or_path: the notation (a ``str``), or a file to read it from (a ``Path``);
            a file's machine headers name files relative to it.
        :param source: where machine headers are resolved (default: none for text, the
            file's folder for a file).
        :raises MachineError: the machine is refused (``kind`` says how).
        :raises SpawnFailed: a cartridge failed to start.
        :raises EngineError: the file cannot be read.
        """
        from ._machines._text import read_machine
        from ._relay._switch import WithHosts

        both = WithHosts(self, self._hosts.switch())
        return await read_machine(both, both.names(list(self._slots)), text_or_path, source)

    def stream_machine(
        self,
        machine: Machine,
        inputs: Mapping[str, Any],
        *,
        window: int = DEFAULT_WINDOW,
        keep_outputs: bool = False,
        cache: str | os.PathLike[str] | CacheStore | None = None,
        outputs: Sequence[str] | str = (),
        record: str | os.PathLike[str] | RunRecorder | None = None,
    ) -> MachineRun:
        """Run a resolved machine, streaming: ``async with engine.stream_machine(m, inputs) as
        run: async for event in run``. The events are the steps' and items' starts and ends,
        progress, logs and the machine's output data as it is produced (see
        :mod:`cartridge_runtime.engine` for the event types).

        :param inputs: each machine input, by the node name the text wrote, as a value
            :meth:`call` takes (bytes, text, ``Path``, async iterable of bytes, list of items),
            or a ``(media_urn, value)`` pair that states the value's type.
        :param window: items of one map in flight at once.
        :param keep_outputs: also keep the output data in ``run.result``.
        :param cache: a step cache (a folder or a :class:`CacheStore`): each step call is
            looked up before it is made and stored after (see ``docs/runs.md``).
        :param outputs: more nodes to give back than the machine's outputs: node names (an
            inner node too; a node made per item comes back as its items), or ``"all"``.
        :param record: a folder to write this run's record in (a new sub-folder per run), or
            a :class:`RunRecorder`.
        :raises MachineInputError: an input missing, unknown or not of its node's type, or a
            tap naming no node (before anything starts).
        :raises CacheError: the cache folder cannot be used.
        :raises MachineRunError: (while iterating) a step failed; names the step, its cap, the
            item, and carries the call's code, attribution class and ``arg_urn``.
        """
        from ._machines._api import open_run

        return open_run(
            self,
            machine,
            inputs,
            window=window,
            keep_outputs=keep_outputs,
            observers=self._observers,
            cache=cache,
            outputs=outputs,
            record=record,
        )

    async def run_machine(
        self,
        machine: Machine | str | os.PathLike[str],
        inputs: Mapping[str, Any],
        *,
        window: int = DEFAULT_WINDOW,
        cache: str | os.PathLike[str] | CacheStore | None = None,
        outputs: Sequence[str] | str = (),
        record: str | os.PathLike[str] | RunRecorder | None = None,
    ) -> MachineResult:
        """Run a machine (a :class:`Machine`, its notation, or a file of it) to the end;
        ``cache``, ``outputs`` and ``record`` as for :meth:`stream_machine`.

        :returns: every output by the node name the text wrote, and per step what it did.
        :raises MachineError: the text is refused.
        :raises MachineInputError: the inputs do not fit the machine.
        :raises MachineRunError: a step failed (the run is cancelled at the first failure).
        """
        from ..machine import Machine
        from ._machines._api import run_to_end

        if not isinstance(machine, Machine):
            machine = await self.machine(machine)
        return await run_to_end(
            self,
            machine,
            inputs,
            window=window,
            observers=self._observers,
            cache=cache,
            outputs=outputs,
            record=record,
        )

    # -- cartridges (forwarded to the engine's Cartridges) -------------------------------------------

    def add_cartridge(
        self,
        target: str | os.PathLike[str] | Sequence[str] | object,
        *,
        replicas: int = 1,
        placement: Placement | None = None,
        known_caps: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        eager: bool = False,
        name: str | None = None,
        memory_limit: int | None = None,
        idle_timeout: float | None = None,
        activity_timeout: float | None = None,
        manifest: Manifest | None = None,
        check_outputs: bool = True,
    ) -> str:
        """Register a cartridge; returns its name (unique within the engine).

        :param target: for a subprocess (the default placement), a ``.py`` script (run with
            this interpreter), a ``.js`` script (run with ``node``), an executable (a bare
            name that exists in the current folder runs as ``./name``, else it is looked up
            on ``PATH``), or a command list; for
            ``InProcess(runtime)``, a name or the runtime. A ``CartridgeRuntime`` given
            without a placement runs in process.
        :param replicas: how many instances run it; each call goes to the least-loaded ready
            one, and each is respawned on its own after its death.
        :param placement: where the instances run: :class:`Subprocess` (the default, or
            ``EngineConfig.placement``), :class:`InProcess`.
        :param known_caps: its cap URNs, so calls route to it before it ever started.
        :param env: the process environment (default: inherit).
        :param eager: start its replicas as soon as the engine runs instead of at the first call.
        :param memory_limit: resident bytes (each instance's process tree) past which an
            instance is killed, its calls failing with ``OOM_KILLED`` (default
            ``EngineConfig.memory_limit``); the next call starts it again.
        :param idle_timeout: seconds without a call after which an instance is stopped
            gracefully, and started again by the next call (default
            ``EngineConfig.idle_timeout``: never).
        :param activity_timeout: seconds a call to it may go without a frame before it fails
            with ``TIMEOUT`` (``math.inf``: none); it wins over the caps' metadata
            ``activity_timeout_secs`` and ``EngineConfig.activity_timeout``, a call's own
            ``activity_timeout=`` over it.
        :param manifest: its manifest, when known without starting it (a discovery's cache
            gives it): planning and machine resolution read it instead of starting the
            cartridge, and its caps route calls as ``known_caps`` do. The manifest the
            cartridge sends at start-up takes its place.
        :param check_outputs: hold its calls' outputs to their media definitions (HST-24);
            ``False``: never for this cartridge.
        :raises CartridgeNotFound: the script or program does not exist (nothing is added).
        :raises TypeError: the placement cannot run this target, or ``placement`` is not one.
        :raises ValueError: ``replicas`` is not a whole number of at least 1, ``memory_limit``
            not a positive whole number of bytes, or ``idle_timeout`` or ``activity_timeout``
            not positive seconds.
        """
        return self._cartridges.add(
            target,
            replicas=replicas,
            placement=placement,
            known_caps=known_caps,
            env=env,
            eager=eager,
            name=name,
            memory_limit=memory_limit,
            idle_timeout=idle_timeout,
            activity_timeout=activity_timeout,
            manifest=manifest,
            check_outputs=check_outputs,
        )

    async def replace_cartridge(
        self,
        name: str,
        target: str | os.PathLike[str] | Sequence[str] | object,
        *,
        drain: float = 30.0,
        placement: Placement | None = None,
        env: Mapping[str, str] | None = None,
        known_caps: Sequence[str] | None = None,
    ) -> None:
        """Upgrade cartridge ``name`` to ``target`` without losing a call: start the new
        version (every replica), route new calls to it at once, let calls in flight on the old
        one finish within ``drain`` seconds, then end the rest with ``CARTRIDGE_RETIRED`` and
        stop it. A call never sees a mix of versions. The new version keeps the name, the
        place in routing order, the replicas and the supervision options of the old.

        :raises SpawnFailed: the new version cannot start (the old one goes on serving).
        :raises EngineError: no such cartridge.
        """
        await self._cartridges.replace(
            name, target, drain=drain, placement=placement, env=env, known_caps=known_caps
        )

    async def remove_cartridge(self, name: str, *, drain: float = 30.0) -> None:
        """Stop routing calls to cartridge ``name`` at once; let its calls in flight finish
        within ``drain`` seconds, then end the rest with ``CARTRIDGE_RETIRED`` and stop it.

        :raises EngineError: no such cartridge.
        """
        await self._cartridges.remove(name, drain=drain)

    def subscribe(self, *, buffer: int = 1024) -> Subscription:
        """Events of this engine from now on: cartridges and caps added, replaced and
        removed; instances started, died, respawned, idle, OOM-killed, retired; calls stalled
        and retried. Use as ``async with engine.subscribe() as events: async for event in
        events``. A subscriber more than ``buffer`` events behind misses the newest
        (``Subscription.dropped`` counts them); the engine never waits for one.

        :raises ValueError: ``buffer`` is not a whole number of at least 1.
        """
        return self._cartridges.subscribe(buffer=buffer)

    async def start(self, name: str) -> None:
        """Start a cartridge now, every replica of it (no-op for those running).

        :raises SpawnFailed: a start-up failed (the first replica's, in order).
        """
        await self._cartridges.start(name)

    async def restart(self, name: str) -> None:
        """Forget start-up failures and (re)start the cartridge's replicas, stopping those
        running first.

        :raises SpawnFailed: a start-up failed.
        """
        await self._cartridges.restart(name)

    async def stop(self, name: str) -> None:
        """Shut one cartridge down, every replica of it (a later call starts it again)."""
        await self._cartridges.stop(name)

    def kill(self, name: str, *, replica: int | None = None) -> None:
        """Kill a cartridge's instances at once, or only replica ``replica`` (for tests and
        operators).

        :raises EngineError: no such cartridge or replica.
        """
        self._cartridges.kill(name, replica=replica)

    def manifest(self, name: str) -> Any:
        """The :class:`~cartridge_runtime.manifest.Manifest` of a started cartridge, else the one
        given to :meth:`add_cartridge`, or ``None``.
        """
        return self._cartridges.manifest(name)

    async def probe(self, name: str, *, replica: int = 0) -> bool:
        """Send one health probe now (to replica ``replica``, starting it if needed); returns
        whether it answered in time.

        :raises EngineError: no such cartridge or replica.
        :raises SpawnFailed: it cannot start.
        """
        return await self._cartridges.probe(name, replica=replica)

    def _supervised(self) -> list[CartridgeSlot]:
        """The cartridges with instances to watch: those added, and those draining."""
        return [*self._slots.values(), *self._draining]

    def _caps_changed(self) -> None:
        """The routing table changed (a cartridge added, or its manifest became known)."""
        self._router.changed()

    # -- routing ---------------------------------------------------------------------------

    def route(self, cap: str) -> str | None:
        """The name of the cartridge a call to ``cap`` would go to now (``None``: unknown yet)."""
        hit = self._router.lookup(cap)
        return hit[0].name if hit is not None else None

    # -- calls -----------------------------------------------------------------------------

    def call(
        self,
        cap: str,
        inputs: Inputs | None = None,
        *,
        timeout: float | None = None,
        activity_timeout: float | None = None,
        retry: Retry | None = None,
        check_outputs: bool = True,
    ) -> CallContext:
        """Call ``cap`` with ``inputs`` (``[(media_urn, value), ...]`` or a mapping).

        A value is ``bytes``/``bytearray``/``memoryview``, ``str`` (sent as text), a
        :class:`pathlib.Path` (the file's bytes, its size in the stream meta), an async
        iterable of ``bytes``, or a list/tuple of items (a sequence stream; wrap an item in
        :class:`Item` to give it meta). Two ways to use it:

        * ``result = await engine.call(cap, inputs)``: the whole :class:`Result`;
        * ``async with engine.call(cap, inputs) as response:``: a :class:`Response` to stream
          (leaving the block before the response ended cancels the call).

        :param timeout: seconds for the whole call, start-up and queueing included (``None``:
            no limit). When it runs out the call is cancelled and fails with
            :class:`CallTimeout` (code ``TIMEOUT``, class ``resource``). With ``retry=``, per
            attempt.
        :param activity_timeout: seconds the call may go without receiving a frame before it
            is cancelled and fails with :class:`CallTimeout` ("no activity for N s");
            ``None``: its cap's metadata ``activity_timeout_secs``, else
            ``EngineConfig.activity_timeout``; ``math.inf``: none.
        :param retry: a :class:`Retry` policy: a failure it covers (by default class
            ``environment`` or code ``OOM_KILLED``) is tried again after an exponential
            backoff with jitter, unless output already reached the caller or an input was a
            stream; :attr:`Result.attempts` counts the attempts.
        :param check_outputs: ``False``: its outputs are not held to their media definitions
            (HST-24; by default an output whose media URN has a definition with rules or a
            JSON Schema is checked when it ends, and a failure is :class:`OutputInvalid`).
        :raises NoRoute: no cartridge provides ``cap`` (raised on awaiting or entering).
        :raises SpawnFailed: the chosen cartridge cannot start.
        :raises CallError: the call failed (when awaited).
        :raises ArgumentError: the inputs do not fit the cap's definition in the cartridge's
            manifest (a required argument missing, an input no argument takes, a list for an
            argument taking one value); raised on awaiting or entering, before anything is sent.
        :raises TypeError: malformed ``inputs`` (at once).
        :raises ValueError: ``activity_timeout`` is not positive seconds, or ``retry`` is not a
            :class:`Retry` (at once).
        """
        if activity_timeout is None and retry is None and check_outputs:
            options = _PLAIN if timeout is None else CallOptions(timeout=timeout)
        else:
            if retry is not None and not isinstance(retry, Retry):
                raise ValueError(f"retry must be a Retry(...), not {type(retry).__name__}")
            options = CallOptions(
                timeout=timeout,
                activity_timeout=check_limit(activity_timeout, "activity_timeout"),
                retry=retry,
                check_outputs=bool(check_outputs),
            )
        opener = self._opener
        return CallContext(
            opener.open, cap, normalize_inputs(inputs), options, self._on_retry, opener.open_now
        )

    def _on_retry(self, cap: str, attempt: int, delay: float, error: CallError) -> None:
        log.info(
            "a call to %s failed (%s); attempt %d in %.3g s", cap, error.code, attempt + 1, delay
        )
        if self._hub.active:
            self._hub.emit(
                CallRetried(
                    cap=cap,
                    attempt=attempt,
                    delay=delay,
                    code=error.code,
                    message=error.message,
                    at=_now(),
                )
            )

    async def call_bytes(
        self,
        cap: str,
        inputs: Inputs | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Result:
        """Call ``cap`` and collect the whole response: the same as ``await engine.call(...)``.

        :raises CallError: the call failed (or could not be routed or started);
            :class:`CallTimeout` when ``timeout`` ran out.
        """
        return await self.call(cap, inputs, timeout=timeout)

    def _host_calls(self) -> Iterable[object]:
        return self._opener.host_calls()

    # -- live control ----------------------------------------------------------------------

    def set_policy(self, policy: NetworkPolicy | str) -> None:
        """Change the network policy: sent as POLICY to every running cartridge now (its
        handlers see it at once, ``req.network``) and to every cartridge started later.

        :raises ValueError: not a policy word (``offline``, ``no_telemetry``, ``full``).
        """
        word = NetworkPolicy(policy)
        self.config = attrs.evolve(self.config, policy=word)
        self._hosts.set_policy(word)
        for slot in self._slots.values():
            for replica in slot.replicas:
                conn = replica.conn
                if conn is not None and conn.ready:
                    conn.send(frames.policy(word))

    async def set_capacity(self, cartridge: str, pool: str, capacity: int) -> None:
        """Set a pool's capacity in a running cartridge (the heartbeat's desired capacities,
        FLW-14); the reply updates the engine's admission too. ``0`` means unlimited.

        :raises EngineError: no such cartridge, or it is not running.
        :raises ValueError: a negative or non-integer capacity.
        :raises CallError: the cartridge has no such pool (``UNKNOWN_POOL``), or did not
            answer within ``EngineConfig.heartbeat_timeout`` (``TIMEOUT``).
        """
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError("a pool capacity is an integer of 0 or more")
        slot = self._slots.get(cartridge)
        if slot is None:
            raise EngineError(f"no cartridge named {cartridge!r}")
        running = [r.conn for r in slot.replicas if r.conn is not None and r.conn.ready]
        if not running:
            raise EngineError(f"cartridge {cartridge!r} is not running")
        for conn in running:  # pool capacities are per replica
            await set_capacities(conn, {pool: capacity}, self.config.heartbeat_timeout)

    def add_observer(self, observer: CallObserver) -> None:
        """Tell ``observer`` about every call from now on: its start, the metrics and trace
        events its handler reports, its end (bytes in and out, outcome). The OpenTelemetry
        exporter (:class:`~cartridge_runtime.engine.OtelExporter`, extra ``otel``) is one.
        Without observers a call costs nothing extra. An observer with a ``watch_status``
        method is given :meth:`status` too (the exporter reports each replica from it)."""
        self._observers.append(observer)
        watch_status = getattr(observer, "watch_status", None)
        if callable(watch_status):
            watch_status(self.status)

    def graph(
        self,
        *,
        machine: str | os.PathLike[str] | None = None,
        inputs: Mapping[str, Any] | None = None,
        load: Any = None,
        limits: Any = None,
        catalogue: Any = None,
        observers: Sequence[Any] = (),
        cache: str | os.PathLike[str] | CacheStore | None = None,
    ) -> AbstractAsyncContextManager[Graph]:
        """A graph that grows while it runs: ``async with engine.graph() as g:`` (see
        ``docs/graphs.md``). Cartridges whose calls run in it may grow it through the
        grow-graph cap, which the engine answers itself.

        :param machine: seed the graph from machine notation (text or a file); ``inputs``
            gives its input nodes values (each node is an alias of the same name).
        :param load: a document :meth:`Graph.dump` wrote (a dict or its JSON): the graph,
            its states and the outputs of its finished nodes, to resume a run.
        :param limits: a :class:`~cartridge_runtime.graph.GraphLimits`.
        :param catalogue: a :class:`Catalogue` of cartridges the graph may activate; without
            it, nothing outside the engine's own cartridges.
        :param observers: callables given each logged operation and node event (a dict).
        :param cache: a step cache (a folder or a :class:`CacheStore`): a cap node whose
            inputs are all known when it starts is looked up and stored as a machine step.
        :raises GraphRefused: a ``load`` document that is not a graph.
        :raises MachineError: a ``machine`` that is refused.
        """
        from ._graphs._seed import open_graph

        return open_graph(
            self,
            hub=self._grow_hub,
            route=self._route_with_hosts,
            manifest_of=self._manifest_with_hosts,
            machine=machine,
            inputs=inputs,
            load=load,
            limits=limits,
            catalogue=catalogue,
            observers=observers,
            cache=cache,
            resolve=self._router.resolve,
        )

    def _route_with_hosts(self, cap: str) -> str | None:
        """The cartridge a call to ``cap`` would go to now: one of the engine's, else a
        host's (``HOST/CARTRIDGE``)."""
        name = self.route(cap)
        if name is None and self._hosts.links:
            found = self._hosts.link_for(cap)
            if found is not None:
                return found[0].name
        return name

    def _manifest_with_hosts(self, name: str) -> Any:
        """The manifest of cartridge ``name``, a host's (``HOST/CARTRIDGE``) included."""
        if not self._hosts.links:
            return self.manifest(name)
        from ._relay._switch import WithHosts

        return WithHosts(self, self._hosts.switch()).manifest(name)

    async def add_host(self, path: str | os.PathLike[str], *, name: str | None = None) -> str:
        """Attach the cartridge host listening on the Unix socket ``path`` (``cartridge host
        --listen``, or capdag's host runtime behind its relay): its cartridges are routed to
        for every cap this engine's own cartridges do not serve. Returns its name (default:
        the socket file's name without extension) once the host's identity probe has ended,
        so a call made next is routed to it; a host whose probe failed stays attached but
        unhealthy (``hosts()`` says why) and is logged. When its link closes, its calls fail
        with ``MASTER_DIED`` and the engine dials again, re-attaching it in place.

        :raises HostSocketError: the socket's folder is not owner-only, its listener runs as
            another user, or nobody listens.
        :raises HostAttachError: a host of that name is attached already.
        :raises RelayProtocolError: its first frame is not a readable RELAY_NOTIFY.
        """
        self._life.check_running()
        from ._relay._attach import dial_host, host_name, probe_ended

        label = host_name(path, name)
        async with self.subscribe() as events:
            await dial_host(self._hosts.switch(), path, label)
            await probe_ended(self._hosts.switch(), events, label)
        return label

    async def listen_for_host(
        self, path: str | os.PathLike[str], *, name: str | None = None
    ) -> str:
        """Create an owner-only Unix socket at ``path`` for a host that dials in (``cartridge
        host --connect PATH``); each link it opens re-attaches it in place. Returns its name.

        :raises HostSocketError: the socket's folder is not owner-only.
        """
        tg = self._life.check_running()
        from ._relay._attach import host_name, listen_for_host

        label = host_name(path, name)
        await tg.start(listen_for_host, self._hosts.switch(), path, label)
        return label

    def set_host_state(self, name: str, payload: bytes) -> None:
        """Give host ``name`` an opaque resources payload (RELAY_STATE, RLY-4): sent at once
        when it is attached, and again right after POLICY each time it attaches (RLY-17), so a
        host that comes back has it. The host keeps the latest and never forwards it to its
        cartridges; what it means is agreed between the application and the host.

        :raises TypeError: ``payload`` is not bytes.
        """
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"a host's state is bytes, not {type(payload).__name__}")
        self._hosts.switch().set_state(name, bytes(payload))

    def hosts(self) -> tuple[HostView, ...]:
        """Every host attached (or once attached) to this engine: its state, inventory,
        limits and last error."""
        return self._hosts.hosts()

    async def serve_switch(self, stream: anyio.abc.ByteStream, *, name: str = "switch") -> None:
        """Serve a relay switch over ``stream`` as a cartridge host until the link closes:
        this engine's cartridges become the switch's, and their peer calls go to it (RLY-*).
        ``cartridge host`` runs it over a Unix socket (:mod:`cartridge_runtime.host`).

        :raises EngineClosed: the engine is not running (use it in ``async with``).
        """
        from ._relay._host import serve_link

        self._life.check_running()
        await serve_link(self, stream, name, self._peers.serve_request, self._peers.redirect_peers)

    def _on_peer_request(self, origin: PeerEnd, frame: Frame) -> None:
        self._peers.on_peer_request(origin, frame)

    # -- reports ---------------------------------------------------------------------------

    def status(self) -> list[CartridgeStatus]:
        """One snapshot per cartridge, in the order they were added (each replica's in
        ``replicas``), then one per cartridge of each attached host (``host`` set, named
        ``HOST/CARTRIDGE``)."""
        own = [cartridge_status(slot) for slot in self._slots.values()]
        hosted = self._hosts.statuses()
        return own + hosted if hosted else own

    def stats(self) -> EngineStats:
        """Protocol counters over every cartridge since the engine started."""
        c = self._counters
        return EngineStats(
            drops=c.drops,
            stragglers=c.stragglers,
            no_route=c.no_route,
            protocol_errors=c.protocol_errors,
            heartbeat_misses=c.heartbeat_misses,
            respawns=c.respawns,
            late_credits=c.late_credits,
        )


def _now() -> float:
    return anyio.current_time()


__all__ = ("CartridgeStatus", "Engine", "EngineStats", "describe_returncode")


async def discover(
    root: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | Literal[False] | None = None,
    refresh: bool = False,
    config: EngineConfig | None = None,
) -> Discovery:
    """Every cartridge installed under ``root``, with its manifest (DSC-1 .. DSC-12): from the
    cache when it holds it, else by starting the cartridge once (and stopping it). Nothing is
    hosted; :meth:`Engine.discover` hosts what this finds.

    :param cache: the manifest cache folder; ``None``: the per-user one; ``False``: none.
    :param refresh: start every cartridge even when the cache holds it.
    :param config: the configuration of the engine that starts the cache misses (default:
        each start-up step may take ``DISCOVERY_STEP_TIMEOUT`` seconds, no heartbeats).
    :raises RootNotFound: ``root`` does not exist or is not a folder.
    """
    from ..discovery import find_installed
    from ._discover import probe

    return await find_installed(
        root,
        starter=functools.partial(probe, engine_type=Engine, config=config),
        cache=cache,
        refresh=refresh,
    )
