"""Fresh request ids: UUID version 4, unique, and never shared between a process and its fork."""

from __future__ import annotations

import os
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
