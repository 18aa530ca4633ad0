"""capdag 1.524.58's ``RelaySwitch`` as a test driver (test-only peer).

:class:`CapdagSwitch` connects the reference switch to a host's Unix socket (ours, or
capdag's host runtime behind its ``RelaySlave``), sends requests with ``send_to_master``
and files what ``read_from_masters`` returns by request id, granting credit both ways. Every
wait has a deadline.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import cbor2
from capdag.bifaci.frame import (
    CancelReason,
    CreditDirection,
    Frame,
    FrameType,
    MessageId,
    compute_checksum,
)
from capdag.bifaci.policy import HostPolicy, NetworkPolicy
from capdag.bifaci.relay_switch import RelaySwitch, SocketPair, UnknownRequestError

CHUNK = 262_144
WINDOW = 32


class _Inbox:
    def __init__(self) -> None:
        self.frames: queue.Queue[Frame] = queue.Queue()
        self.credit: dict[str | None, int] = {}
        self.cond = threading.Condition()


class CapdagSwitch:
    """The reference switch attached to host sockets (``paths``, in that order)."""

    def __init__(self, *paths: str) -> None:
        self.socks = []
        pairs = []
        for n, path in enumerate(paths, 1):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            self.socks.append(sock)
            pairs.append(
                SocketPair(id=f"host-{n}", read=sock.makefile("rb"), write=sock.makefile("wb"))
            )
        self.switch = RelaySwitch(pairs, HostPolicy(NetworkPolicy.FULL))
        self._inboxes: dict[str, _Inbox] = {}
        self._lock = threading.Lock()
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    def close(self) -> None:
        for sock in self.socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _inbox(self, rid: MessageId) -> _Inbox:
        key = rid.to_string()
        with self._lock:
            box = self._inboxes.get(key)
            if box is None:
                box = self._inboxes[key] = _Inbox()
            return box

    def _read_loop(self) -> None:
        try:
            while True:
                frame = self.switch.read_from_masters()
                if frame is None:
                    return
                box = self._inbox(frame.id)
                if (
                    frame.frame_type == FrameType.CREDIT
                    and (frame.meta or {}).get("credit_dir") == "request"
                ):
                    with box.cond:
                        box.credit[frame.stream_id] = box.credit.get(frame.stream_id, 0) + (
                            frame.credit or 0
                        )
                        box.cond.notify_all()
                    continue
                box.frames.put(frame)
        except Exception:  # the switch's own failure ends the driver
            return
        finally:
            self.ended.set()

    def start(
        self,
        cap: str,
        args: Sequence[tuple[str, bytes]],
        *,
        timeout: float = 30.0,
        rid: MessageId | None = None,
    ) -> MessageId:
        rid = rid or MessageId.new_uuid()
        box = self._inbox(rid)
        deadline = time.monotonic() + timeout
        self.switch.send_to_master(Frame.req(rid, cap, b"", "application/cbor"))
        for index, (media, data) in enumerate(args):
            sid = f"arg-{index}"
            with box.cond:
                box.credit[sid] = box.credit.get(sid, 0) + WINDOW
            self.switch.send_to_master(Frame.stream_start(rid, sid, media))
            view = memoryview(data)
            pieces = [view[i : i + CHUNK] for i in range(0, len(data), CHUNK)] or [view[:0]]
            for n, piece in enumerate(pieces):
                with box.cond:
                    while box.credit.get(sid, 0) <= 0:
                        if not box.cond.wait(timeout=max(0.001, deadline - time.monotonic())):
                            raise AssertionError(f"no request credit for {sid}")
                    box.credit[sid] -= 1
                payload = cbor2.dumps(bytes(piece))
                self.switch.send_to_master(
                    Frame.chunk(rid, sid, 0, payload, n, compute_checksum(payload))
                )
            self.switch.send_to_master(Frame.stream_end(rid, sid, len(pieces)))
        # the handler may answer as soon as its stream ended: the reference then refuses the
        # requester's END for a request it already closed
        with contextlib.suppress(UnknownRequestError):
            self.switch.send_to_master(Frame.end(rid))
        return rid

    def next_frame(self, rid: MessageId, timeout: float) -> Frame:
        """The next frame the switch returned for ``rid``."""
        return self._inbox(rid).frames.get(timeout=timeout)

    def cancel(self, rid: MessageId) -> None:
        """The switch's own cancel: it ends the request at once with ERR CANCELLED."""
        self.switch.cancel_request(rid, CancelReason.user())

    def collect(self, rid: MessageId, *, timeout: float = 30.0) -> dict[str, Any]:
        """``{"data": bytes, "end": meta | None, "error": meta | None, "kinds": [...]}``."""
        box = self._inbox(rid)
        out: dict[str, Any] = {"data": bytearray(), "end": None, "error": None, "kinds": []}
        pending: dict[str | None, int] = {}
        deadline = time.monotonic() + timeout
        while True:
            try:
                frame = box.frames.get(timeout=max(0.001, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no terminal frame; got {out['kinds']}") from None
            kind = FrameType(frame.frame_type)
            out["kinds"].append(kind.name)
            if kind == FrameType.CHUNK:
                value = cbor2.loads(frame.payload or b"")
                out["data"] += value if isinstance(value, bytes) else str(value).encode()
                pending[frame.stream_id] = pending.get(frame.stream_id, 0) + 1
                if pending[frame.stream_id] >= WINDOW // 2:
                    pending[frame.stream_id] = 0
                    # The switch may have seen the END already (our queue lags behind it): it
                    # then refuses a credit for the finished request, which nothing needs.
                    with contextlib.suppress(UnknownRequestError):
                        self.switch.send_to_master(
                            Frame.credit(
                                rid, frame.stream_id, WINDOW // 2, CreditDirection.RESPONSE
                            )
                        )
            elif kind == FrameType.END:
                out["end"] = dict(frame.meta or {})
                return out
            elif kind == FrameType.ERR:
                out["error"] = dict(frame.meta or {})
                return out

    def call(self, cap: str, args: Sequence[tuple[str, bytes]], **kw: Any) -> dict[str, Any]:
        """One request, its response read while its body is sent (an echo streams back)."""
        rid = MessageId.new_uuid()
        result: dict[str, Any] = {}

        def read() -> None:
            try:
                result.update(self.collect(rid, **kw))
            except Exception as exc:  # reported by the caller
                result["failure"] = exc

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            self.start(cap, args, rid=rid, **kw)
        except Exception as exc:  # the request ended at the switch under its body: say how
            reader.join(timeout=5)
            raise AssertionError(f"{exc!r}; the response: {result}") from exc
        reader.join()
        if "failure" in result:
            raise result["failure"]
        return result
