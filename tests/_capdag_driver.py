"""A small engine-role driver for the reference host (capdag 1.524.58, test-only).

capdag's ``CartridgeHost`` does not talk to callers directly: it sits below an
"engine" and exchanges frames with it over a relay link (two byte pipes). This
module plays that engine, built only from capdag's own frame functions
(``Frame.*``, ``FrameReader``/``FrameWriter``, ``compute_checksum``), so that
tests can let the *reference* host spawn, handshake, identity-check and drive
a cartridge written with this project's runtime.

Shape:

* :class:`CapdagEngine` starts ``CartridgeHost.run`` in a daemon thread over two
  ``os.pipe`` pairs, sends the POLICY the host needs before it routes anything,
  and runs one reader thread that files every host→engine frame under its
  request id (frames with no per-request home, such as RELAY_NOTIFY, are
  counted and dropped).
* :meth:`CapdagEngine.call` sends one request (REQ, one stream per argument,
  END) with flow control in both directions, and collects the response into a
  :class:`Response`: output streams by stream id, LOG frames, and the terminal
  END or ERR.

Every wait has a deadline; a missing frame raises :class:`DriverTimeout`
instead of hanging the test run.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

import attrs
import cbor2
from capdag.bifaci.cartridge_repo import CartridgeChannel
from capdag.bifaci.frame import (
    CreditDirection,
    Frame,
    FrameType,
    MessageId,
    compute_checksum,
)
from capdag.bifaci.host_runtime import CartridgeHost
from capdag.bifaci.io import FrameReader, FrameWriter
from capdag.bifaci.policy import HostPolicy, NetworkPolicy

#: Default per-wait deadline: generous for the reference host (10 ms polling,
#: about 4 MB/s), short enough that a broken cartridge fails the test quickly.
DEFAULT_TIMEOUT = 20.0
#: Data bytes per CHUNK the driver sends (the protocol default max_chunk).
CHUNK_SIZE = 262_144
#: The request window the cartridge grants by default (frames per stream).
INITIAL_CREDIT = 32


class DriverTimeout(AssertionError):
    """A frame the test waited for did not arrive in time."""


@attrs.define
class OutputStream:
    """One response stream as it arrived."""

    stream_id: str
    media_urn: str
    output: str | None
    is_sequence: bool
    #: Decoded chunk values (scalar mode) or whole items (sequence mode).
    values: list[Any] = attrs.field(factory=list)
    raw_fragments: list[bytes] = attrs.field(factory=list)
    chunk_count: int | None = None
    ended: bool = False

    def data(self) -> bytes:
        """The stream's bytes: bstr/tstr contents joined (the byte-collector rule)."""
        parts: list[bytes] = []
        for value in self.values:
            if isinstance(value, bytes):
                parts.append(value)
            elif isinstance(value, str):
                parts.append(value.encode("utf-8"))
            else:
                parts.append(cbor2.dumps(value))
        return b"".join(parts)


@attrs.define
class Response:
    """Everything the host forwarded for one request."""

    streams: dict[str, OutputStream] = attrs.field(factory=dict)
    logs: list[dict[str, Any]] = attrs.field(factory=list)
    end_meta: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    frames: list[Frame] = attrs.field(factory=list)

    @property
    def main(self) -> OutputStream:
        """The main output: the one stream without an ``output`` key (21)."""
        mains = [s for s in self.streams.values() if s.output is None]
        assert len(mains) == 1, f"expected one main output, got {self.streams!r}"
        return mains[0]

    def output(self, media_urn: str) -> OutputStream:
        """The secondary output whose key-21 URN is ``media_urn`` (text compare)."""
        for stream in self.streams.values():
            if stream.output == media_urn:
                return stream
        raise KeyError(f"no output {media_urn!r} in {list(self.streams)!r}")


class _Inbox:
    """Frames for one request id, plus the request-direction credit window."""

    def __init__(self) -> None:
        self.frames: queue.Queue[Frame] = queue.Queue()
        self.credit: dict[str | None, int] = {}
        self.cond = threading.Condition()


class CapdagEngine:
    """Drives a capdag ``CartridgeHost`` from the engine side of its relay link."""

    def __init__(
        self,
        cartridge_path: str,
        manifest: dict[str, Any],
        *,
        policy: NetworkPolicy = NetworkPolicy.FULL,
    ) -> None:
        self._host = CartridgeHost()
        self._host.register_cartridge(
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
        self._inboxes: dict[str, _Inbox] = {}
        self._inbox_lock = threading.Lock()
        self.relay_notifies = 0
        self.host_error: BaseException | None = None
        self._next_xid = 1
        self._host_thread = threading.Thread(target=self._run_host, daemon=True)
        self._reader_thread = threading.Thread(target=self._read_loop, daemon=True)
        self._host_thread.start()
        self._reader_thread.start()
        self._send(Frame.policy(HostPolicy(policy)))

    # -- plumbing ----------------------------------------------------------------

    def _run_host(self) -> None:
        try:
            self._host.run(self._host_in, self._host_out)
        except BaseException as exc:  # recorded for the test to report
            self.host_error = exc
        finally:
            with contextlib.suppress(OSError):
                self._host_out.close()

    def _inbox(self, rid: MessageId) -> _Inbox:
        key = rid.to_string()
        with self._inbox_lock:
            inbox = self._inboxes.get(key)
            if inbox is None:
                inbox = self._inboxes[key] = _Inbox()
            return inbox

    def _read_loop(self) -> None:
        while True:
            try:
                frame = self._reader.read()
            except Exception:
                return
            if frame is None:
                return
            if frame.frame_type == FrameType.RELAY_NOTIFY:
                self.relay_notifies += 1
                continue
            inbox = self._inbox(frame.id)
            if (
                frame.frame_type == FrameType.CREDIT
                and (frame.meta or {}).get("credit_dir") == "request"
            ):
                with inbox.cond:
                    inbox.credit[frame.stream_id] = inbox.credit.get(frame.stream_id, 0) + (
                        frame.credit or 0
                    )
                    inbox.cond.notify_all()
                continue
            inbox.frames.put(frame)

    def _send(self, frame: Frame) -> None:
        with self._write_lock:
            self._writer.write(frame)

    def close(self) -> None:
        """Close the relay link; the host then kills its cartridges and returns."""
        with self._write_lock, contextlib.suppress(OSError):
            self._writer.inner_mut().close()
        self._host_thread.join(timeout=10)
        self._reader_thread.join(timeout=5)

    # -- requests ----------------------------------------------------------------

    def _wait_credit(self, inbox: _Inbox, stream_id: str, deadline: float) -> None:
        with inbox.cond:
            while inbox.credit.get(stream_id, 0) <= 0:
                left = deadline - time.monotonic()
                if left <= 0 or not inbox.cond.wait(timeout=left):
                    if inbox.credit.get(stream_id, 0) > 0:
                        break
                    raise DriverTimeout(f"no request credit for stream {stream_id!r}")
            inbox.credit[stream_id] -= 1

    def start_call(
        self,
        cap: str,
        args: Sequence[tuple[str, bytes]],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        end_body: bool = True,
    ) -> MessageId:
        """Send REQ, one stream per ``(media_urn, data)`` argument and (by
        default) the requester's END; return the request id."""
        rid = MessageId.new_uuid()
        xid = MessageId(self._next_xid)
        self._next_xid += 1
        inbox = self._inbox(rid)
        deadline = time.monotonic() + timeout
        seq = 0

        def put(frame: Frame) -> None:
            nonlocal seq
            frame.routing_id = xid
            frame.seq = seq
            seq += 1
            self._send(frame)

        put(Frame.req(rid, cap, b"", "application/cbor"))
        for index, (media_urn, data) in enumerate(args):
            stream_id = f"arg-{index}"
            with inbox.cond:
                inbox.credit[stream_id] = inbox.credit.get(stream_id, 0) + INITIAL_CREDIT
            put(Frame.stream_start(rid, stream_id, media_urn))
            view = memoryview(data)
            pieces = [view[i : i + CHUNK_SIZE] for i in range(0, len(data), CHUNK_SIZE)] or [
                view[:0]
            ]
            for chunk_index, piece in enumerate(pieces):
                self._wait_credit(inbox, stream_id, deadline)
                payload = cbor2.dumps(bytes(piece))
                put(Frame.chunk(rid, stream_id, 0, payload, chunk_index, compute_checksum(payload)))
            put(Frame.stream_end(rid, stream_id, len(pieces)))
        if end_body:
            put(Frame.end(rid))
        return rid

    def collect(self, rid: MessageId, *, timeout: float = DEFAULT_TIMEOUT) -> Response:
        """Read the response to ``rid`` until END or ERR, granting response
        credit as chunks are consumed (batches of half the window)."""
        inbox = self._inbox(rid)
        response = Response()
        pending: dict[str, int] = {}
        batch = INITIAL_CREDIT // 2
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                frame = inbox.frames.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise DriverTimeout(
                    f"no terminal frame for request {rid} after {timeout}s; got "
                    f"{[FrameType(f.frame_type).name for f in response.frames]}"
                    + (f"; host error {self.host_error!r}" if self.host_error else "")
                ) from None
            response.frames.append(frame)
            kind = frame.frame_type
            if kind == FrameType.STREAM_START:
                response.streams[frame.stream_id] = OutputStream(
                    stream_id=frame.stream_id,
                    media_urn=frame.media_urn,
                    output=frame.output_urn(),
                    is_sequence=bool(frame.is_sequence),
                )
            elif kind == FrameType.CHUNK:
                stream = response.streams[frame.stream_id]
                assert frame.checksum == compute_checksum(frame.payload or b"")
                if stream.is_sequence:
                    stream.raw_fragments.append(frame.payload or b"")
                else:
                    stream.values.append(cbor2.loads(frame.payload))
                pending[frame.stream_id] = pending.get(frame.stream_id, 0) + 1
                if pending[frame.stream_id] >= batch:
                    pending[frame.stream_id] = 0
                    grant = Frame.credit(rid, frame.stream_id, batch, CreditDirection.RESPONSE)
                    grant.routing_id = frame.routing_id
                    self._send(grant)
            elif kind == FrameType.STREAM_END:
                stream = response.streams[frame.stream_id]
                stream.chunk_count = frame.chunk_count
                stream.ended = True
                if stream.is_sequence:
                    stream.values = _decode_sequence(b"".join(stream.raw_fragments))
            elif kind == FrameType.LOG:
                response.logs.append(dict(frame.meta or {}))
            elif kind == FrameType.END:
                response.end_meta = dict(frame.meta or {})
                return response
            elif kind == FrameType.ERR:
                response.error = dict(frame.meta or {})
                return response

    def call(
        self,
        cap: str,
        args: Sequence[tuple[str, bytes]],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Response:
        """One whole request and its response."""
        rid = self.start_call(cap, args, timeout=timeout)
        return self.collect(rid, timeout=timeout)


def _decode_sequence(data: bytes) -> list[Any]:
    """Decode an RFC 8742 CBOR sequence into its items."""
    import io

    stream = io.BytesIO(data)
    items: list[Any] = []
    while stream.tell() < len(data):
        items.append(cbor2.load(stream))
    return items
