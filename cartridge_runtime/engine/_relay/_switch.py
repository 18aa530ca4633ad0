"""The engine's relay switch: cartridge hosts attached over Unix sockets, their cartridges
routable beside the engine's own.

The :class:`~cartridge_runtime.relay.SwitchCore` decides everything (POLICY first, the
identity probe, routing by cap and routing id, admission, a lost host's calls); this shell
reads each host's socket into it, writes what it returns, and hands the application's share
to the calls' flows. A call the engine's own cartridges cannot serve goes through a
:class:`HostCallLink`, the narrow interface a call needs from what it runs on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio
import anyio.abc

from ..._plumbing import FrameOutbox, FramePump, Wake, wake_factory
from ...manifest import Manifest, ManifestError
from ...protocol import (
    Frame,
    FrameDecoder,
    FrameType,
    Limits,
    MessageId,
    NetworkPolicy,
    ProtocolError,
)
from ...relay import (
    HostChanged,
    HostState,
    HostView,
    RelayProtocolError,
    SwitchAction,
    SwitchCore,
    ToApp,
    ToHost,
    app_router,
)
from .._connection._counters import Counters
from .._connection._gate import PoolGate
from .._connection._links import Flow
from .._status import CartridgeStatus
from .._supervision._lifecycle import EventHub, HostLinkChanged
from ._wire import LinkWire

__all__ = ("ATTACH_TIMEOUT", "HostCallLink", "HostSwitch", "WithHosts")

log = logging.getLogger("cartridge_runtime.engine")

#: The largest frame a relay link carries (the protocol's default limit; read once).
_LINK_MAX_FRAME = Limits().max_frame


def _link_max_frame() -> int:
    return _LINK_MAX_FRAME


#: END and ERR, the frames that end a flow.
_TERMINAL = frozenset({FrameType.END, FrameType.ERR})

#: Seconds a host has, once connected, to send its RELAY_NOTIFY.
ATTACH_TIMEOUT = 10.0


class HostCallLink:
    """What a call routed to host ``host`` runs on (the engine's ``CallLink``)."""

    def __init__(self, switch: HostSwitch, host: str, cartridge: str) -> None:
        self._switch = switch
        self.host = host
        self.name = f"{host}/{cartridge}"
        self.gate = PoolGate()  # the switch core holds admission per pool
        self.metric_totals: dict[str, float] = {}
        self._new_wake: Callable[[], Wake] = wake_factory()

    @property
    def limits(self) -> Limits:
        return self._switch.limits_of(self.host)

    @property
    def counters(self) -> Counters:
        return self._switch.counters

    def new_event(self) -> anyio.Event:
        return anyio.Event()

    def new_wake(self) -> Wake:
        return self._new_wake()

    def next_xid(self) -> MessageId:
        """The routing id the switch will give the call's REQ, reserved now: its flow then
        leaves as the call built it (:meth:`HostSwitch.from_app_flow`)."""
        return self._switch.core.reserve_xid()

    def add_flow(self, rid: MessageId, flow: Flow) -> None:
        self._switch.flows[rid] = flow

    def forget(self, rid: MessageId) -> None:
        self._switch.forget_call(rid)

    def forget_flow(self, rid: MessageId, xid: MessageId | None) -> None:
        self._switch.forget_call(rid)

    def send(self, frame: Frame) -> None:
        self._switch.from_app(frame)

    def send_numbered(self, numbered: Frame, seq: int | None) -> None:
        self._switch.from_app(numbered, seq)

    def send_flow(self, frames: Sequence[Frame]) -> None:
        """A whole flow in one go, numbered 0, 1, 2... (the switch core takes each frame)."""
        self._switch.from_app_flow(frames)

    def send_wire(self, data: bytes, count: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
        return None  # the switch core takes frames, not bytes

    def hold(self) -> None:
        pass

    def release(self) -> None:
        pass

    def mark(self) -> tuple[int, int]:
        return (0, 0)

    def withdraw(self, start: tuple[int, int], stop: tuple[int, int]) -> bool:
        return False  # frames went to the core at once: nothing is left to take back

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._switch.spawn(fn, *args)

    def kill(self, reason: str, *, unhealthy: bool = False) -> None:
        self._switch.drop(self.host, reason)


class _Direct:
    """The calls routed to one host whose response frames need nothing of the switch core
    but their END, as the compiled response router sees a connection (``_routing``,
    ``calls``, ``origins``; :func:`~cartridge_runtime.relay._forward.app_router`)."""

    _routing = True

    def __init__(self) -> None:
        self.calls: dict[MessageId, Flow] = {}
        self.origins: dict[MessageId, Any] = {}


class _Link:
    """One attached host's socket: its outbox and the task reading it (internal)."""

    def __init__(self, stream: anyio.abc.ByteStream, direct: _Direct) -> None:
        self.stream = stream
        self.wire = LinkWire(stream)
        self.outbox = FrameOutbox(self.wire.sink, _link_max_frame)
        self.scope = anyio.CancelScope()
        self.direct = direct


class HostSwitch:
    """The hosts attached to one engine (see the module docstring)."""

    def __init__(self, counters: Counters, hub: EventHub, policy: NetworkPolicy) -> None:
        self.core = SwitchCore(policy)
        self.counters = counters
        self._hub = hub
        self.flows: dict[MessageId, Flow] = {}
        #: One call link per (host, cartridge), shared by the calls routed there.
        self._call_links: dict[tuple[str, str], HostCallLink] = {}
        self._links: dict[str, _Link] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._timer_wake = anyio.Event()

    # -- life ---------------------------------------------------------------------------------

    def run_in(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        tg.start_soon(self._timers)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is not None:
            self._tg.start_soon(fn, *args)

    async def attach(self, stream: anyio.abc.ByteStream, name: str) -> None:
        """Read the host's RELAY_NOTIFY, attach it (POLICY first, then the probe) and serve
        its link in the background; a closed link leaves the host detached.

        :raises HostAttachError: ``name`` is attached already.
        :raises RelayProtocolError: the host's first frame is not a readable RELAY_NOTIFY.
        """
        direct = _Direct()
        pump = FramePump(FrameDecoder(), app_router(direct, lambda f: self._from_host(name, f)))
        try:
            with anyio.fail_after(ATTACH_TIMEOUT):
                first = await pump.next_frame(stream)
        except TimeoutError:
            await stream.aclose()
            raise RelayProtocolError(
                f"host {name} sent no RELAY_NOTIFY within {ATTACH_TIMEOUT:g} s"
            ) from None
        except ProtocolError:
            await stream.aclose()
            raise
        if first is None:
            await stream.aclose()
            raise RelayProtocolError(f"host {name} closed the link before its RELAY_NOTIFY")
        try:
            actions = self.core.attach(name, first, anyio.current_time())
        except ProtocolError:
            await stream.aclose()
            raise
        link = self._links[name] = _Link(stream, direct)
        assert self._tg is not None
        self._tg.start_soon(self._serve, name, link, pump)
        self._apply(actions)
        self._timer_wake.set()

    async def _serve(self, name: str, link: _Link, pump: FramePump) -> None:
        reason = "connection closed"
        with link.scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(link.outbox.run)
                try:
                    await pump.run(link.wire.source)
                except ProtocolError as exc:
                    reason = f"broke the protocol: {exc}"
                    log.warning("host %s %s", name, reason)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    reason = f"link failed: {exc}"
                tg.cancel_scope.cancel()  # the host is gone or broke a rule: nothing to flush
        self._lost(name, link, reason)

    def drop(self, host: str, reason: str) -> None:
        """Close the link of ``host`` (a call found it broken)."""
        link = self._links.get(host)
        if link is not None:
            log.warning("host %s: %s", host, reason)
            link.scope.cancel()

    def _lost(self, name: str, link: _Link, reason: str) -> None:
        if self._links.get(name) is link:
            del self._links[name]
        link.direct.calls.clear()
        link.outbox.close()
        link.wire.stop()
        self._apply(self.core.host_lost(name, reason))
        if self._tg is not None:
            self._tg.start_soon(_close, link.stream)

    async def _timers(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            wake = self._timer_wake = anyio.Event()
            if deadline is None:
                await wake.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await wake.wait()
            self._apply(self.core.handle_timer(anyio.current_time()))

    # -- frames -----------------------------------------------------------------------------

    def from_app(self, frame: Frame, seq: int | None = None) -> None:
        """A frame of the application's (numbered ``seq`` on the link when given)."""
        self._apply(self.core.send(frame, seq=seq))

    def from_app_flow(self, flow: Sequence[Frame]) -> None:
        """A whole flow of the application's, numbered 0, 1, 2... on the link: what goes
        to a host is queued under one hold and leaves in one write. A flow the core takes
        whole (its routing id reserved for the call) is encoded in one call, unchanged."""
        host, actions = self.core.send_flow(flow)
        if host is not None:
            link = self._links.get(host)
            if link is not None:
                rid = flow[0].id
                call = self.flows.get(rid)
                if call is not None and self.core.answered(host, rid):
                    link.direct.calls[rid] = call
                outbox = link.outbox
                outbox.hold()
                try:
                    outbox.push_flow(flow)
                finally:
                    outbox.release()
            return
        held: list[FrameOutbox] = []
        try:
            for action in actions:
                if isinstance(action, ToHost):
                    link = self._links.get(action.host)
                    if link is not None:
                        outbox = link.outbox
                        if outbox not in held:
                            outbox.hold()
                            held.append(outbox)
                        outbox.push(action.frame)
                else:
                    self._apply([action])
        finally:
            for outbox in held:
                outbox.release()

    def forget_call(self, rid: MessageId) -> None:
        """The call ``rid`` ended: its flow is routed no more."""
        self.flows.pop(rid, None)
        for link in self._links.values():
            link.direct.calls.pop(rid, None)

    def _from_host(self, name: str, frame: Frame) -> None:
        # The time matters only to an inventory, which may start an identity probe (the one
        # thing the core times): the clock is not read for every other frame.
        kind = frame.frame_type
        if kind is not FrameType.RELAY_NOTIFY:
            response = self.core.response_for_app(name, frame)
            if response is not None:  # most of a response: straight to its call's flow
                flow = self.flows.get(response.id)
                if flow is None:
                    self.counters.stragglers += 1
                elif response.routing_id is flow.xid:  # the xid the switch reserved for it
                    flow.on_frame(response)
                else:
                    flow.on_frame(response.replace(routing_id=flow.xid))
                return
            admitted = self.core.end_for_app(name, frame)
            if admitted is not None:  # its END: the route ended, the call's flow gets it
                self._to_call(frame)
                self._apply(admitted)
                return
        now = anyio.current_time() if kind is FrameType.RELAY_NOTIFY else 0.0
        self._apply(self.core.receive(name, frame, now))

    def _to_call(self, frame: Frame) -> None:
        """A frame for one of the application's calls, given the call's routing id."""
        flow = self.flows.get(frame.id)
        if flow is None:
            self.counters.stragglers += 1
            return
        if frame.frame_type in _TERMINAL:
            self.forget_call(frame.id)
        flow.on_frame(frame if frame.routing_id is flow.xid else frame.replace(routing_id=flow.xid))

    def _apply(self, actions: list[SwitchAction]) -> None:
        for action in actions:
            if isinstance(action, ToHost):
                link = self._links.get(action.host)
                if link is not None:
                    frame = action.frame
                    outbox = link.outbox
                    if frame.frame_type in _TERMINAL:
                        # a flow's last frame: what is queued leaves now in one write, not
                        # from a loop callback one turn later
                        outbox.hold()
                        outbox.push(frame)
                        outbox.release()
                    else:
                        outbox.push(frame)
            elif isinstance(action, ToApp):
                self._to_call(action.frame)
            elif isinstance(action, HostChanged):
                self._changed(action)

    def _changed(self, change: HostChanged) -> None:
        if change.state is HostState.PROBING:
            self._timer_wake.set()
        if self._hub.active:
            self._hub.emit(
                HostLinkChanged(
                    host=change.host,
                    state=change.state.value,
                    detail=change.error or "",
                    at=anyio.current_time(),
                )
            )

    # -- routing and reports ---------------------------------------------------------------

    def link_for(self, cap: str) -> tuple[HostCallLink, str] | None:
        """Where a call to ``cap`` would go among the hosts, and the cap it is served by."""
        found = self.core.route(cap)
        if found is None:
            return None
        host, registered, cartridge = found
        link = self._call_links.get((host, cartridge))
        if link is None:
            link = self._call_links[(host, cartridge)] = HostCallLink(self, host, cartridge)
        return link, registered

    def limits_of(self, host: str) -> Limits:
        return self.core.limits_of(host)

    def hosts(self) -> tuple[HostView, ...]:
        return self.core.hosts()

    def statuses(self) -> list[CartridgeStatus]:
        """One status per cartridge of every host, named ``HOST/CARTRIDGE``."""
        out = []
        for view in self.core.hosts():
            healthy = view.state is HostState.HEALTHY
            for record in view.inventory.records:
                stats = record.raw.get("runtime_stats") or {}
                error = record.attachment_error
                if error is not None:
                    state = "failed"
                elif view.state is HostState.DETACHED:
                    state = "dead"
                else:
                    state = "running" if record.running else "stopped"
                out.append(
                    CartridgeStatus(
                        name=f"{view.id}/{record.id}",
                        command=(),
                        state=state,
                        pid=stats.get("pid") if isinstance(stats.get("pid"), int) else None,
                        healthy=healthy and error is None,
                        caps=record.caps,
                        in_flight=_int(stats.get("active_request_count")),
                        queued=0,
                        starts=_int(stats.get("restart_count")) + (1 if record.running else 0),
                        last_error=str(error.get("message")) if error else view.last_error,
                        returncode=None,
                        stderr_tail="",
                        log_path="",
                        last_heartbeat=None,
                        remote_stats={},
                        pools={},
                        host=view.id,
                    )
                )
        return out

    def set_policy(self, policy: NetworkPolicy) -> None:
        self._apply(self.core.set_policy(policy))

    def set_state(self, host: str, payload: bytes) -> None:
        """Give ``host`` its resources payload (RELAY_STATE): now, and on every attach."""
        self._apply(self.core.relay_state(host, payload))

    def attached(self, name: str) -> bool:
        return name in self._links

    @property
    def links(self) -> int:
        """How many hosts are attached now."""
        return len(self._links)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class WithHosts:
    """The engine's manifests and those of its healthy hosts' cartridges (named
    ``HOST/CARTRIDGE``), for resolving machines and plans over both."""

    def __init__(self, engine: Any, switch: HostSwitch) -> None:
        self._engine = engine
        self._hosted: dict[str, Manifest] = {}
        for view in switch.hosts():
            if view.state is not HostState.HEALTHY:
                continue
            for record in view.inventory.records:
                if not record.routable:
                    continue
                with contextlib.suppress(ManifestError):
                    self._hosted[f"{view.id}/{record.id}"] = Manifest.from_dict(
                        {
                            "name": record.id,
                            "version": record.version,
                            "channel": record.channel,
                            "registry_url": record.registry_url,
                            "description": "",
                            "cap_groups": record.raw.get("cap_groups") or [],
                        }
                    )

    def names(self, own: list[str]) -> list[str]:
        """The engine's cartridges first, then the hosts'."""
        return own + list(self._hosted)

    async def start(self, name: str) -> None:
        if name not in self._hosted:
            await self._engine.start(name)

    def manifest(self, name: str) -> Any:
        hosted = self._hosted.get(name)
        return hosted if hosted is not None else self._engine.manifest(name)


async def _close(stream: anyio.abc.ByteStream) -> None:
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            await stream.aclose()
