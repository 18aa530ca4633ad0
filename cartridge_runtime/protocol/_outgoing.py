"""The sending side of one stream: payload encoding, coalescing, chunk numbering, credit.

Theory of operation
-------------------
An :class:`OutgoingStream` turns what a producer emits into frames: STREAM_START on first
use, CHUNKs with contiguous ``chunk_index`` and their checksum, STREAM_END with the number
of chunks sent. It never does IO; every method returns the frames to write, in order.

Scalar byte emissions are coalesced (REQ-10): appended to a buffer that is cut into a chunk
when it reaches :data:`COALESCE_BYTES`, when its oldest byte is :data:`COALESCE_AGE` old at
the next append (``now`` is an argument: there is no timer), on :meth:`flush`, before any
non-byte emission, and on :meth:`close`. Sequence streams are never coalesced.

Credit (FLW-*) is tracked here but enforced by the IO shell: before writing a CHUNK it calls
:meth:`take_credit`, and waits for a grant (:meth:`grant`) when that returns ``False``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from . import _builders as build
from ._constants import COALESCE_AGE, COALESCE_BYTES
from ._errors import LocalProtocolError
from ._frame import Frame, MessageId
from ._payload import bstr_head, scalar_payloads, sequence_fragments


class OutState(enum.Enum):
    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


class OutgoingStream:
    """One outgoing stream of a request (arguments) or a response (outputs).

    :param max_chunk: data bytes per CHUNK (use :attr:`Limits.effective_chunk`).
    :param initial_credit: the negotiated window.
    :param coalesce: coalesce small scalar byte emissions (the reference's behaviour).
    """

    __slots__ = (
        "_buf",
        "_buf_since",
        "chunks_sent",
        "coalesce",
        "credit",
        "is_sequence",
        "max_chunk",
        "media_urn",
        "meta",
        "output",
        "rid",
        "state",
        "stream_id",
        "unbounded",
        "xid",
    )

    def __init__(
        self,
        rid: MessageId,
        stream_id: str,
        media_urn: str,
        *,
        xid: MessageId | None = None,
        max_chunk: int,
        initial_credit: int,
        is_sequence: bool = False,
        unbounded: bool = False,
        output: str | None = None,
        meta: Mapping[str, Any] | None = None,
        coalesce: bool = True,
    ) -> None:
        self.rid = rid
        self.xid = xid
        self.stream_id = stream_id
        self.media_urn = media_urn
        self.max_chunk = max_chunk
        self.credit = initial_credit
        self.is_sequence = is_sequence
        self.unbounded = unbounded
        self.output = output
        self.meta = meta
        self.coalesce = coalesce
        self.state = OutState.NEW
        self.chunks_sent = 0
        self._buf = bytearray()
        self._buf_since = 0.0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(
        self,
        *,
        is_sequence: bool | None = None,
        unbounded: bool | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> list[Frame]:
        """STREAM_START (once). Mode and stream meta may be set here, before first use.

        :raises LocalProtocolError: the stream was already started.
        """
        if self.state is not OutState.NEW:
            raise LocalProtocolError(f"stream {self.stream_id!r} already started")
        if is_sequence is not None:
            self.is_sequence = is_sequence
        if unbounded is not None:
            self.unbounded = unbounded
        if meta is not None:
            self.meta = meta
        self.state = OutState.OPEN
        return [
            build.stream_start(
                self.rid,
                self.stream_id,
                self.media_urn,
                xid=self.xid,
                is_sequence=self.is_sequence,
                unbounded=self.unbounded,
                output=self.output,
                meta=self.meta,
            )
        ]

    def _ensure_open(self) -> list[Frame]:
        if self.state is OutState.OPEN:
            return []
        if self.state is OutState.CLOSED:
            raise LocalProtocolError(f"stream {self.stream_id!r} is closed")
        return self.start()

    def close(self) -> list[Frame]:
        """Flush, then STREAM_END with the chunk count (none on unbounded streams).

        A stream never started is started first, so a required output is an empty stream.
        """
        state = self.state
        if state is OutState.CLOSED:
            return []
        buf = self._buf
        if state is OutState.OPEN and 0 < len(buf) <= self.max_chunk:
            # The common small response: its coalesced bytes and the end, built in one go.
            data = bytes(buf)
            buf.clear()
            self.state = OutState.CLOSED
            index = self.chunks_sent
            self.chunks_sent = index + 1
            rid, sid, xid = self.rid, self.stream_id, self.xid
            return [
                build.chunk(rid, sid, index, bstr_head(len(data)) + data, xid=xid),
                build.stream_end(rid, sid, None if self.unbounded else index + 1, xid=xid),
            ]
        out = self._ensure_open()
        out += self.flush()
        self.state = OutState.CLOSED
        out.append(
            build.stream_end(
                self.rid, self.stream_id, None if self.unbounded else self.chunks_sent, xid=self.xid
            )
        )
        return out

    @property
    def started(self) -> bool:
        return self.state is not OutState.NEW

    @property
    def closed(self) -> bool:
        return self.state is OutState.CLOSED

    # -- data --------------------------------------------------------------------------------

    def _chunk(self, payload: bytes, meta: Mapping[str, Any] | None = None) -> Frame:
        f = build.chunk(
            self.rid, self.stream_id, self.chunks_sent, payload, xid=self.xid, meta=meta
        )
        self.chunks_sent += 1
        return f

    def write_verified(self, data: bytes, checksum: int, size: int) -> list[Frame]:
        """Forward bytes a peer sent in one CHUNK of ``size`` payload bytes whose checksum was
        verified: when this stream would send exactly that payload (one chunk, the canonical
        head, nothing coalesced before it) the CHUNK carries ``checksum`` and the bytes are not
        hashed again; otherwise this is :meth:`write_bytes`."""
        head = bstr_head(len(data))
        if (
            self.is_sequence
            or self._buf
            or type(data) is not bytes
            or not 0 < len(data) <= self.max_chunk
            or len(head) + len(data) != size
        ):
            return self.write_bytes(data)
        out = self._ensure_open()
        out.append(
            build.chunk(
                self.rid, self.stream_id, self.chunks_sent, head + data, xid=self.xid,
                checksum=checksum,
            )
        )  # fmt: skip
        self.chunks_sent += 1
        return out

    def write_bytes(self, data: bytes | bytearray | memoryview, now: float = 0.0) -> list[Frame]:
        """Emit bytes on a scalar stream (coalesced), or as one item on a sequence stream."""
        out = self._ensure_open()
        if self.is_sequence:
            return out + self.emit_item(bytes(data))
        n = len(data)
        if not n:
            return out
        if not self.coalesce or (not self._buf and n >= COALESCE_BYTES):
            return out + [self._chunk(p) for p in scalar_payloads(data, self.max_chunk)]
        if self._buf and now - self._buf_since >= COALESCE_AGE:
            out += self.flush()
        if not self._buf:
            self._buf_since = now
        self._buf += data
        if len(self._buf) >= COALESCE_BYTES:
            out += self.flush()
        return out

    def emit_value(self, value: Any) -> list[Frame]:
        """Emit one value. Scalar streams: split as the reference does (text on character
        boundaries, a list element per chunk, a map entry per chunk). Sequence streams: one item.
        """
        out = self._ensure_open()
        if self.is_sequence:
            return out + self.emit_item(value)
        out += self.flush()
        out += [self._chunk(p) for p in scalar_payloads(value, self.max_chunk)]
        return out

    def emit_raw(self, payload: bytes) -> list[Frame]:
        """One CHUNK with ``payload`` exactly as given (must already be one CBOR item in scalar mode)."""
        out = self._ensure_open()
        out += self.flush()
        out.append(self._chunk(payload))
        return out

    def emit_item(
        self, value: Any, meta: Mapping[str, Any] | None = None, *, encoded: bool = False
    ) -> list[Frame]:
        """One sequence item, CBOR-encoded once and cut into fragments; meta on the first.

        :raises LocalProtocolError: the stream is in scalar mode.
        """
        out = self._ensure_open()
        if not self.is_sequence:
            raise LocalProtocolError(f"stream {self.stream_id!r} is not a sequence stream")
        frags = sequence_fragments(value, self.max_chunk, encoded=encoded)
        out.append(self._chunk(frags[0], meta))
        out += [self._chunk(f) for f in frags[1:]]
        return out

    def flush(self) -> list[Frame]:
        """Send the coalesced bytes now, if any."""
        if not self._buf:
            return []
        data = bytes(self._buf)
        self._buf.clear()
        return [self._chunk(p) for p in scalar_payloads(data, self.max_chunk)]

    def due(self, now: float) -> bool:
        """True when coalesced bytes are old enough that an idle producer should flush."""
        return bool(self._buf) and now - self._buf_since >= COALESCE_AGE

    @property
    def buffered(self) -> int:
        return len(self._buf)

    # -- credit ------------------------------------------------------------------------------

    def take_credit(self) -> bool:
        """Spend one credit for a CHUNK about to be written; ``False`` when none is left."""
        if self.credit <= 0:
            return False
        self.credit -= 1
        return True

    def grant(self, n: int) -> None:
        """Apply a CREDIT received for this stream."""
        self.credit += n
