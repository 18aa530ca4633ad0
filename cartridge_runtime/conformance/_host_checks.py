"""Conformance of a cartridge host behind a relay socket (``cartridge conform --host PATH``).

The kit plays the switch with raw frames over the host's Unix socket, one fresh link per
check (a host serves one switch at a time), and judges what the host sends: RELAY_NOTIFY
first with a readable inventory, no routing before POLICY, the identity echo, RELAY_STATE
kept to itself, a HELLO refused, an unknown cap answered, and an owner-only socket. Like the
cartridge checks it trusts nothing of the package it certifies beyond the codec.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import cbor2

from ..protocol import (
    IDENTITY_CAP,
    ZERO_ID,
    ErrorCode,
    Frame,
    FrameDecoder,
    FrameType,
    MessageId,
    ProtocolError,
    encode_frame,
    frames,
)
from ._model import CheckResult, Level, Status
from ._outcomes import CheckFailed
from ._runner import Report

__all__ = ("HOST_CHECKS", "run_host_conformance")


class _Link:
    """One blocking link to the host, frames in and out, every read under a deadline."""

    def __init__(self, path: str, timeout: float) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.decoder = FrameDecoder()
        self.timeout = timeout

    def close(self) -> None:
        self.sock.close()

    def send(self, *out: Frame) -> None:
        self.sock.sendall(b"".join(encode_frame(f) for f in out))

    def read(self) -> Frame | None:
        """The next frame; ``None`` when the host closed the link."""
        deadline = time.monotonic() + self.timeout
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            if time.monotonic() > deadline:
                raise CheckFailed(f"no frame from the host within {self.timeout:g} s")
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                raise CheckFailed(f"no frame from the host within {self.timeout:g} s") from None
            except OSError:
                data = b""
            if not data:
                return None
            self.decoder.feed(data)

    def until(self, rid: MessageId) -> list[Frame]:
        """The host's frames of request ``rid`` up to its END or ERR (others skipped)."""
        got: list[Frame] = []
        while True:
            frame = self.read()
            if frame is None:
                raise CheckFailed("the host closed the link before answering")
            if frame.id == rid:
                got.append(frame)
                if frame.frame_type.is_terminal:
                    return got


def _open(path: str, timeout: float) -> tuple[_Link, Frame]:
    """A new link and its first frame. A host serves one switch at a time, so a link closed
    at once (the previous check's still ending) is tried again until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        link = _Link(path, timeout)
        first = link.read()
        if first is not None:
            return link, first
        link.close()
        if time.monotonic() > deadline:
            raise CheckFailed("the host closed every link without a RELAY_NOTIFY")
        time.sleep(0.05)


def _echo_probe(link: _Link) -> str:
    rid, xid, nonce = MessageId.new(), MessageId(1), os.urandom(32)
    body = cbor2.dumps(nonce)
    link.send(
        frames.req(rid, IDENTITY_CAP, xid=xid),
        frames.stream_start(rid, "identity-verify", "media:", xid=xid, seq=1),
        frames.chunk(rid, "identity-verify", 0, body, xid=xid, seq=2),
        frames.stream_end(rid, "identity-verify", 1, xid=xid, seq=3),
        frames.end(rid, xid=xid, response=False, seq=4),
    )
    got = link.until(rid)
    echoed = b"".join(cbor2.loads(f.payload or b"") for f in got if f.frame_type is FrameType.CHUNK)
    if got[-1].frame_type is not FrameType.END or echoed != nonce:
        raise CheckFailed(f"the identity probe was not echoed: {[f.frame_type.name for f in got]}")
    return "the nonce came back"


def check_notify_first(path: str, timeout: float) -> str:
    link, first = _open(path, timeout)
    link.close()
    if first.frame_type is not FrameType.RELAY_NOTIFY:
        raise CheckFailed(f"first frame is {first.frame_type.name}, not RELAY_NOTIFY")
    meta = first.meta or {}
    limits = [
        meta.get(k) for k in ("max_frame", "max_chunk", "max_reorder_buffer", "initial_credit")
    ]
    if list(meta)[:1] != ["manifest"] or not all(isinstance(v, int) and v > 0 for v in limits):
        raise CheckFailed(f"RELAY_NOTIFY meta is not manifest then four limits: {list(meta)}")
    try:
        inventory = json.loads(bytes(meta["manifest"]))
        records = inventory["installed_cartridges"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckFailed(f"the manifest is not an inventory: {exc}") from None
    for record in records:
        if "registry_url" not in record or record.get("channel") not in ("release", "nightly"):
            raise CheckFailed(f"record {record.get('id')!r} lacks registry_url or a channel")
    return f"{len(records)} cartridge(s) announced"


def check_no_route_before_policy(path: str, timeout: float) -> str:
    link, _first = _open(path, timeout)
    try:
        rid = MessageId.new()
        link.send(frames.req(rid, IDENTITY_CAP, xid=MessageId(1)))
        (*_, last) = link.until(rid)
    finally:
        link.close()
    code = (last.meta or {}).get("code")
    if last.frame_type is not FrameType.ERR or code != ErrorCode.PROTOCOL_VIOLATION:
        raise CheckFailed(f"a REQ before POLICY got {last.frame_type.name} {code or ''}")
    return "ERR PROTOCOL_VIOLATION"


def check_identity_echo(path: str, timeout: float) -> str:
    link, _first = _open(path, timeout)
    try:
        link.send(frames.policy("offline"))
        return _echo_probe(link)
    finally:
        link.close()


def check_relay_state_kept(path: str, timeout: float) -> str:
    link, _first = _open(path, timeout)
    try:
        link.send(
            frames.policy("offline"),
            Frame(frame_type=FrameType.RELAY_STATE, id=ZERO_ID, payload=b"resources"),
        )
        return "the link goes on after RELAY_STATE: " + _echo_probe(link)
    finally:
        link.close()


def check_hello_refused(path: str, timeout: float) -> str:
    from ..protocol import Limits

    link, _first = _open(path, timeout)
    try:
        link.send(frames.hello(Limits()))
        while True:
            try:
                frame = link.read()
            except ProtocolError:
                frame = None
            if frame is None:
                return "the host closed the link"
            if frame.frame_type is FrameType.RELAY_NOTIFY:
                continue
            raise CheckFailed(f"after a HELLO the host sent {frame.frame_type.name}")
    finally:
        link.close()


def check_unknown_cap(path: str, timeout: float) -> str:
    link, _first = _open(path, timeout)
    try:
        rid = MessageId.new()
        link.send(
            frames.policy("offline"),
            frames.req(rid, "cap:no-cartridge-serves-this-cap", xid=MessageId(1)),
            frames.end(rid, xid=MessageId(1), response=False, seq=1),
        )
        (*_, last) = link.until(rid)
    finally:
        link.close()
    if last.frame_type is not FrameType.ERR:
        raise CheckFailed(f"an unknown cap got {last.frame_type.name}")
    return f"ERR {(last.meta or {}).get('code')}"


def check_owner_only(path: str, timeout: float) -> str:
    where = Path(path)
    mode = stat.S_IMODE(where.stat().st_mode)
    folder = stat.S_IMODE(where.parent.stat().st_mode)
    if mode & 0o077 or folder & 0o077:
        raise CheckFailed(f"socket mode {mode:o}, folder mode {folder:o}: others may reach it")
    return f"socket {mode:o}, folder {folder:o}"


#: ``(id, title, level, rules, check)``; the ids number the host catalogue.
HOST_CHECKS: tuple[tuple[str, str, Level, str, Callable[[str, float], str]], ...] = (
    ("HOST-1", "RELAY_NOTIFY first, inventory readable", Level.MUST, "RLY-1 RLY-2 RLY-3",
     check_notify_first),
    ("HOST-2", "No routing before POLICY", Level.MUST, "HST-8", check_no_route_before_policy),
    ("HOST-3", "The identity probe is echoed", Level.MUST, "RLY-6", check_identity_echo),
    ("HOST-4", "RELAY_STATE is kept, the link goes on", Level.MUST, "RLY-4",
     check_relay_state_kept),
    ("HOST-5", "A HELLO from the switch closes the link", Level.MUST, "RLY-9",
     check_hello_refused),
    ("HOST-6", "An unknown cap is answered with ERR", Level.MUST, "HST-12", check_unknown_cap),
    ("HOST-7", "Owner-only socket and folder", Level.MUST, "RLY-14", check_owner_only),
)  # fmt: skip


def run_host_conformance(path: str, *, timeout: float = 20.0) -> Report:
    """Run the host catalogue against the host listening on the Unix socket ``path``."""
    started = time.monotonic()
    results = []
    for ident, title, level, _rules, check in HOST_CHECKS:
        t0 = time.monotonic()
        try:
            detail, status = check(path, timeout), Status.PASS
        except CheckFailed as exc:
            detail, status = exc.detail, Status.FAIL
        except OSError as exc:
            detail, status = f"cannot use the socket: {exc}", Status.FAIL
        results.append(
            CheckResult(
                id=ident,
                title=title,
                level=level,
                status=status,
                detail=detail,
                duration=time.monotonic() - t0,
            )
        )
    return Report(target=path, results=tuple(results), duration=time.monotonic() - started)
