"""The engine's cartridge hosts, their switch built on first need.

Most engines never attach a host; their calls only ask whether one is attached. The switch
(:class:`~._relay._switch.HostSwitch`, over the relay's sans-IO core) is built, and the relay
imported, the first time a host is attached or given state, so an engine that makes plain
calls imports none of it. The questions a call asks are answered here without building it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.abc

from ..protocol import NetworkPolicy
from ._connection._counters import Counters
from ._status import CartridgeStatus
from ._supervision._lifecycle import EventHub

if TYPE_CHECKING:
    from ..relay import HostView
    from ._relay._switch import HostCallLink, HostSwitch

__all__ = ("Hosts",)

_NO_FLOWS: Mapping[Any, Any] = {}


class Hosts:
    """The engine's hosts: a :class:`HostSwitch` once needed, ``None`` before."""

    def __init__(self, counters: Counters, hub: EventHub, policy: NetworkPolicy) -> None:
        self._counters = counters
        self._hub = hub
        self._policy = policy
        self._tg: anyio.abc.TaskGroup | None = None
        self.built: HostSwitch | None = None

    def switch(self) -> HostSwitch:
        """The switch, built (and run in the engine's task group, when it runs) on first use."""
        switch = self.built
        if switch is None:
            from ._relay._switch import HostSwitch

            switch = self.built = HostSwitch(self._counters, self._hub, self._policy)
            if self._tg is not None:
                switch.run_in(self._tg)
        return switch

    def run_in(self, tg: anyio.abc.TaskGroup | None) -> None:
        """The engine runs in ``tg``: so does the switch, now or once built (``None``: the
        engine stopped; a switch built later waits for the next start)."""
        self._tg = tg
        if tg is not None and self.built is not None:
            self.built.run_in(tg)

    @property
    def links(self) -> int:
        """How many hosts are attached now."""
        return self.built.links if self.built is not None else 0

    def link_for(self, cap: str) -> tuple[HostCallLink, str] | None:
        """Where a call to ``cap`` would go among the hosts (``None``: nowhere)."""
        return self.built.link_for(cap) if self.built is not None else None

    def flows(self) -> Mapping[Any, Any]:
        """The calls in flight through hosts, by request id."""
        return self.built.flows if self.built is not None else _NO_FLOWS

    def set_policy(self, policy: NetworkPolicy) -> None:
        self._policy = policy
        if self.built is not None:
            self.built.set_policy(policy)

    def hosts(self) -> tuple[HostView, ...]:
        return self.built.hosts() if self.built is not None else ()

    def described(self) -> str:
        """Each host and where it stands, for a call no one could take (``""``: no host):
        ``hosts: tools (healthy), lab (unhealthy: the probe's answer differs)``."""
        views = self.hosts()
        if not views:
            return ""
        said = []
        for view in views:
            state = view.state.value
            said.append(
                f"{view.id} ({state}: {view.last_error})"
                if view.last_error
                else f"{view.id} ({state})"
            )
        return "hosts: " + ", ".join(said)

    def statuses(self) -> list[CartridgeStatus]:
        """One status per cartridge of every host (none before a host was attached)."""
        if self.built is None or not self.built.core.hosts():
            return []
        return self.built.statuses()
