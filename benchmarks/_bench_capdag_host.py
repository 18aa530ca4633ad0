"""A lean engine-role driver for capdag 1.524.58's ``CartridgeHost``, for benchmarks only.

The reference host does not take calls directly: it sits below an "engine"
and exchanges frames with it over a relay link (two byte pipes). This module
plays that engine with capdag's own frame classes (``Frame.*``,
``FrameReader``/``FrameWriter``), so the benchmark can measure the reference
host driving either capdag's cartridge (pair b) or ours (pair e).

Unlike the test driver in ``tests/_capdag_driver.py`` it keeps nothing it
does not need: response bytes are counted, not stored, so a large echo runs in
constant memory, and request checksums are computed in C (``fnv_c``) so the
driver's own cost stays small next to the host's.

Threads: the host's ``run`` loop, one reader that files host→engine frames
under their request id, and whatever threads the caller uses to issue calls.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

import cbor2
from capdag.bifaci.cartridge_repo import CartridgeChannel
from capdag.bifaci.frame import CreditDirection, Frame, FrameType, MessageId
from capdag.bifaci.host_runtime import CartridgeHost
from capdag.bifaci.io import FrameReader, FrameWriter
from capdag.bifaci.policy import HostPolicy, NetworkPolicy

from cartridge_runtime.protocol import checksum

#: Request-direction window the cartridge grants by default (CHUNK frames per stream).
INITIAL_CREDIT = 32
#: Response credit is granted back in batches of half the window.
GRANT_BATCH = INITIAL_CREDIT // 2
#: Seconds any single wait may take before the benchmark gives up (never hangs).
WAIT_TIMEOUT = 60.0
#: Frames in the host's 64-frame writer queue above which the driver waits before sending
#: (the other half is room for frames still in the relay pipe).
HOST_QUEUE_HIGH_WATER = 32


class HostDriverError(RuntimeError):
    """The host answered with ERR, or a frame did not arrive in time."""


class _Call:
    """Per-request state: the inbox of response frames and the request window."""

    __slots__ = ("cond", "credit", "inbox")

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[Frame] = queue.SimpleQueue()
        self.credit = INITIAL_CREDIT
        self.cond = threading.Condition()


class CapdagHostDriver:
    """Drives one capdag ``CartridgeHost`` with one registered cartridge."""

    def __init__(self, cartridge_path: str, manifest: dict[str, Any]) -> None:
        self.host = CartridgeHost()
        self.host.register_cartridge(
            cartridge_path,
            manifest["name"],
            manifest["version"],
            CartridgeChannel(manifest["channel"]),
            manifest.get("registry_url"),
            manifest["cap_groups"],
        )
        e2h_r, e2h_w = os.pipe()
        h2e_r, h2e_w = os.pipe()
        self._host_in = os.fdopen(e2h_r, "rb")
        self._host_out = os.fdopen(h2e_w, "wb")
        self._writer = FrameWriter(os.fdopen(e2h_w, "wb"))
        self._reader = FrameReader(os.fdopen(h2e_r, "rb"))
        self._write_lock = threading.Lock()
        self._calls: dict[bytes, _Call] = {}
        self._calls_lock = threading.Lock()
        self._xid = 0
        self.host_error: BaseException | None = None
        #: Frames the host dropped because its 64-frame writer queue to the cartridge was
        #: full (a documented capdag 1.524.58 behaviour): counted to explain a stuck call.
        self.host_drops = 0
        self._watch_host_queue()
        self._host_thread = threading.Thread(target=self._run_host, daemon=True)
        self._reader_thread = threading.Thread(target=self._read_loop, daemon=True)
        self._host_thread.start()
        self._reader_thread.start()
        self._send(Frame.policy(HostPolicy(NetworkPolicy.FULL)))

    # -- plumbing -------------------------------------------------------------

    def _watch_host_queue(self) -> None:
        """Count frames the host is about to drop (instrumentation only, same behaviour)."""
        host = self.host
        forward = host._send_to_cartridge  # private in 1.524.58; wrapped on this instance

        def counting(cartridge_idx: int, frame: Frame) -> None:
            writer_queue = getattr(host._cartridges[cartridge_idx], "writer_queue", None)
            if writer_queue is not None and writer_queue.full():
                self.host_drops += 1
            forward(cartridge_idx, frame)

        host._send_to_cartridge = counting

    def _run_host(self) -> None:
        try:
            self.host.run(self._host_in, self._host_out)
        except BaseException as exc:  # reported by the waiting call
            self.host_error = exc
        finally:
            with contextlib.suppress(OSError):
                self._host_out.close()

    def _read_loop(self) -> None:
        while True:
            try:
                frame = self._reader.read()
            except Exception:
                return
            if frame is None:
                return
            if frame.frame_type in (FrameType.RELAY_NOTIFY, FrameType.HEARTBEAT):
                continue
            with self._calls_lock:
                call = self._calls.get(frame.id.as_bytes() if frame.id.is_uuid() else b"")
            if call is None:
                continue
            if frame.frame_type == FrameType.CREDIT:
                if (frame.meta or {}).get("credit_dir") == "request":
                    with call.cond:
                        call.credit += frame.credit or 0
                        call.cond.notify_all()
                continue
            call.inbox.put(frame)

    def _send(self, frame: Frame) -> None:
        with self._write_lock:
            self._wait_for_host_room()
            self._writer.write(frame)

    def _wait_for_host_room(self) -> None:
        """Wait while the host's writer queue to the cartridge is past its high-water mark.

        capdag 1.524.58 drops a frame that finds that 64-frame queue full, and a request that
        loses a frame never ends: with 16 calls in flight on a busy machine that happened in
        the reference pair itself. Pacing the relay side keeps the measurement alive; it
        costs nothing the host's own 10 ms polling does not already cost.
        """
        cartridges = self.host._cartridges  # no public accessor in 1.524.58
        writer_queue = getattr(cartridges[0], "writer_queue", None) if cartridges else None
        if writer_queue is None:
            return
        deadline = time.monotonic() + WAIT_TIMEOUT
        while writer_queue.qsize() >= HOST_QUEUE_HIGH_WATER:
            if time.monotonic() > deadline:
                raise HostDriverError("the host's writer queue to the cartridge stayed full")
            time.sleep(0.0005)

    def close(self) -> None:
        """Close the relay link; the host kills its cartridge and returns."""
        with self._write_lock, contextlib.suppress(OSError):
            self._writer.inner_mut().close()
        self._host_thread.join(timeout=10)
        self._reader_thread.join(timeout=5)

    def cartridge_pid(self) -> int | None:
        """The pid of the running cartridge process (None before its spawn)."""
        for cartridge in self.host._cartridges:  # no public accessor in 1.524.58
            process = getattr(cartridge, "process", None)
            if process is not None and process.poll() is None:
                return int(process.pid)
        return None

    # -- calls ----------------------------------------------------------------

    def _open(self) -> tuple[MessageId, MessageId, _Call]:
        rid = MessageId.new_uuid()
        with self._calls_lock:
            self._xid += 1
            xid = MessageId(self._xid)
            call = self._calls[rid.as_bytes()] = _Call()
        return rid, xid, call

    def _send_request(
        self,
        rid: MessageId,
        xid: MessageId,
        call: _Call,
        cap: str,
        media_urn: str,
        blocks: Iterable[bytes],
    ) -> None:
        """REQ, one argument stream of ``blocks`` (one CHUNK each, under credit), END."""
        seq = 0

        def put(frame: Frame) -> None:
            nonlocal seq
            frame.routing_id = xid
            frame.seq = seq
            seq += 1
            self._send(frame)

        put(Frame.req(rid, cap, b"", "application/cbor"))
        put(Frame.stream_start(rid, "arg-0", media_urn))
        count = 0
        for block in blocks:
            with call.cond:
                while call.credit <= 0:
                    if not call.cond.wait(timeout=WAIT_TIMEOUT):
                        raise HostDriverError("no request credit in time")
                call.credit -= 1
            payload = cbor2.dumps(block)
            put(Frame.chunk(rid, "arg-0", 0, payload, count, checksum(payload)))
            count += 1
        put(Frame.stream_end(rid, "arg-0", count))
        put(Frame.end(rid))

    def _receive(self, rid: MessageId, call: _Call, keep: bool) -> tuple[int, bytes]:
        """Read the response to END; return (data bytes received, data if ``keep``)."""
        total = 0
        kept: list[bytes] = []
        pending = 0
        try:
            while True:
                try:
                    frame = call.inbox.get(timeout=WAIT_TIMEOUT)
                except queue.Empty:
                    raise HostDriverError(
                        f"no response frame in {WAIT_TIMEOUT:.0f}s (host error: "
                        f"{self.host_error!r}; frames the host dropped on a full writer "
                        f"queue: {self.host_drops})"
                    ) from None
                kind = frame.frame_type
                if kind == FrameType.CHUNK:
                    value = cbor2.loads(frame.payload)
                    if isinstance(value, str):
                        value = value.encode()
                    total += len(value)
                    if keep:
                        kept.append(value)
                    pending += 1
                    if pending >= GRANT_BATCH:
                        pending = 0
                        grant = Frame.credit(
                            rid, frame.stream_id, GRANT_BATCH, CreditDirection.RESPONSE
                        )
                        grant.routing_id = frame.routing_id
                        self._send(grant)
                elif kind == FrameType.END:
                    return total, b"".join(kept)
                elif kind == FrameType.ERR:
                    raise HostDriverError(f"ERR {frame.meta!r}")
        finally:
            with self._calls_lock:
                self._calls.pop(rid.as_bytes(), None)

    def call_bytes(self, cap: str, media_urn: str, data: bytes) -> bytes:
        """One small call: the whole argument in one CHUNK; returns the main output bytes."""
        rid, xid, call = self._open()
        self._send_request(rid, xid, call, cap, media_urn, [data])
        return self._receive(rid, call, keep=True)[1]

    def call_stream(self, cap: str, media_urn: str, blocks: Iterable[bytes]) -> int:
        """Send ``blocks`` from a sender thread while counting the response here.

        Returns the number of response data bytes (nothing is kept)."""
        rid, xid, call = self._open()
        failure: list[BaseException] = []

        def sender() -> None:
            try:
                self._send_request(rid, xid, call, cap, media_urn, blocks)
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        total = self._receive(rid, call, keep=False)[0]
        thread.join(timeout=WAIT_TIMEOUT)
        if failure:
            raise HostDriverError(f"sender failed: {failure[0]!r}")
        return total
