"""Fresh request ids: UUID version 4, unique, and never shared between a process and its fork."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from cartridge_runtime.protocol import MessageId


def test_new_ids_are_version_4_uuids_and_unique_across_random_batches() -> None:
    ids = [MessageId.new() for _ in range(1000)]  # several batches of random bytes
    assert len({m.value for m in ids}) == len(ids)
    for m in ids:
        assert isinstance(m.value, bytes)
        u = uuid.UUID(bytes=m.value)
        assert u.version == 4
        assert u.variant == uuid.RFC_4122


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_repeat_its_parents_next_ids() -> None:
    MessageId.new()  # the parent now holds a batch of random bytes
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its next ids, then leave without running pytest's teardown
        try:
            os.close(r)
            os.write(w, b"".join(MessageId.new().value for _ in range(8)))
        finally:
            os._exit(0)
    os.close(w)
    child = b""
    while chunk := os.read(r, 4096):
        child += chunk
    os.close(r)
    os.waitpid(pid, 0)
    parent = b"".join(MessageId.new().value for _ in range(8))
    assert len(child) == 128
    child_ids = {child[i : i + 16] for i in range(0, 128, 16)}
    parent_ids = {parent[i : i + 16] for i in range(0, 128, 16)}
    assert not child_ids & parent_ids


def test_threads_never_get_the_same_id() -> None:
    import threading

    per_thread = 3000
    results: list[list[bytes]] = [[] for _ in range(4)]

    def take(out: list[bytes]) -> None:
        for _ in range(per_thread):
            out.append(MessageId.new().value)  # type: ignore[arg-type]

    threads = [threading.Thread(target=take, args=(r,)) for r in results]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    every = [v for r in results for v in r]
    assert len(every) == 4 * per_thread
    assert len(set(every)) == len(every)


def test_routing_ids_are_shared_with_the_decoder() -> None:
    from cartridge_runtime.protocol import _frame, decode_frame, encode_frame, frames

    xid = _frame.int_id(123456)
    assert xid == MessageId(123456) and hash(xid) == hash(MessageId(123456))
    wire = encode_frame(frames.end(MessageId.new(), xid=xid))
    assert decode_frame(wire).routing_id is xid  # the very object: routing compares no values
