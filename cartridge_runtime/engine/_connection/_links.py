"""The narrow interfaces between a connection and what its frames are routed to: the flow of
a request the engine sent (:class:`Flow`), the origin of a peer request a cartridge sent
(:class:`PeerOrigin`), and what a call needs from the connection it runs on
(:class:`CallLink`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import anyio

from ..._plumbing import Wake
from ...protocol import Frame, Limits, MessageId
from .._errors import CallError
from ._counters import Counters
from ._gate import PoolGate


class Flow(Protocol):
    """What owns the frames of one request this engine sent to a cartridge."""

    xid: MessageId | None

    def on_frame(self, frame: Frame) -> None: ...

    def on_death(self, error: CallError) -> None: ...


class PeerOrigin(Protocol):
    """What owns the frames of one peer request a cartridge sent to the engine."""

    def on_requester_frame(self, frame: Frame) -> None: ...

    def on_origin_death(self) -> None: ...


class CallLink(Protocol):
    """What a call needs from the connection it runs on."""

    @property
    def name(self) -> str: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def gate(self) -> PoolGate: ...

    @property
    def metric_totals(self) -> dict[str, float]: ...

    def new_event(self) -> anyio.Event: ...

    def new_wake(self) -> Wake: ...

    def next_xid(self) -> MessageId: ...

    def add_flow(self, rid: MessageId, flow: Flow) -> None: ...

    def forget(self, rid: MessageId) -> None: ...

    def forget_flow(self, rid: MessageId, xid: MessageId | None) -> None: ...

    def send(self, frame: Frame) -> None: ...

    def send_numbered(self, numbered: Frame, seq: int | None) -> None: ...

    def send_flow(self, frames: Sequence[Frame]) -> None: ...

    def send_wire(
        self, data: bytes, count: int
    ) -> tuple[tuple[int, int], tuple[int, int]] | None: ...

    def hold(self) -> None: ...

    def release(self) -> None: ...

    def mark(self) -> tuple[int, int]: ...

    def withdraw(self, start: tuple[int, int], stop: tuple[int, int]) -> bool: ...

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    def kill(self, reason: str, *, unhealthy: bool = False) -> None: ...
