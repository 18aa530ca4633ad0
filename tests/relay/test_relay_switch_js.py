"""Our ``cartridge host --listen`` driven by a relay switch written in JavaScript
(``js/switch.js``: raw frames, its own CBOR codec). The switch checks the host's first
RELAY_NOTIFY, the refusal of a REQ before POLICY, the identity probe, two echo requests routed
at once with their routing ids kept and their frames numbered as the spec says, and the
wrong-way frames that close the link; it prints a summary this test asserts on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _js import JS, needs_node

pytestmark = needs_node

ROOT = Path(__file__).resolve().parents[2]
INTEROP = str(ROOT / "cartridges" / "interop.py")


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    """One session of the JavaScript switch against our host (the CLI, the interop cartridge)."""
    folder = Path(tempfile.mkdtemp(prefix="rly-", dir="/tmp"))
    os.chmod(folder, 0o700)
    sock = folder / "host.sock"
    cli = Path(sys.executable).with_name("cartridge")
    host = subprocess.Popen(
        [str(cli), "host", "--listen", str(sock), INTEROP], stderr=subprocess.DEVNULL
    )
    try:
        run = subprocess.run(  # the switch dials until the host listens
            ["node", str(JS / "switch.js"), str(sock)],
            capture_output=True,
            timeout=120,
            check=False,
        )
        result: dict[str, Any] = json.loads(run.stdout)
        assert run.returncode == 0, result.get("error") or run.stderr.decode()
        yield result
    finally:
        host.kill()
        host.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _clean(response: dict[str, Any]) -> None:
    """Every frame carried its routing id, was numbered 0, 1, 2... and its chunks held."""
    assert response["xid_wrong"] == 0
    assert response["seq_wrong"] == 0
    assert response["after_terminal"] == 0
    assert response["index_wrong"] == response["checksum_wrong"] == response["count_wrong"] == 0
    assert response["unexpected"] == []


def test_the_first_frame_is_relay_notify_with_its_meta_in_order(summary: dict[str, Any]) -> None:
    notify = summary["notify"]
    assert notify["type"] == "RELAY_NOTIFY" and notify["id"] == 0 and notify["seq"] == 0  # RLY-1/2
    assert notify["meta_keys"] == [
        "manifest",
        "max_frame",
        "max_chunk",
        "max_reorder_buffer",
        "initial_credit",
    ]
    assert notify["manifest_is_bytes"] and notify["limits_positive"]
    (interop,) = notify["records"]  # RLY-3
    assert interop["id"] == "interop" and interop["keys_present"] and interop["sha256_hex"]
    assert interop["channel"] in ("release", "nightly")
    assert interop["pools_object"] and interop["attachment_error"] is None
    assert interop["lifecycle"] != "discovered"  # left out when discovered
    assert "cap:effect=none" in interop["caps"] and "cap:echo" in interop["caps"]
    for again in summary["reannounced"]:  # any later one (the cartridge started) alike
        assert again["id"] == 0 and again["seq"] == 0 and again["meta_keys"] == notify["meta_keys"]


def test_a_request_before_policy_is_refused_with_its_routing_id(
    summary: dict[str, Any],
) -> None:
    assert summary["before_policy"] == {"err": "PROTOCOL_VIOLATION", "xid_wrong": 0, "seq_wrong": 0}
    assert summary["early_stray"] == []


def test_the_identity_probe_echoes_the_nonce(summary: dict[str, Any]) -> None:
    probe = summary["probe"]
    assert probe["echoed"] and probe["exit_code"] == 0
    _clean(probe)
    assert summary["probe_stray"] == []


def test_two_routed_requests_keep_their_routing_ids_and_numbering(
    summary: dict[str, Any],
) -> None:
    big, small = summary["echo_uint"], summary["echo_uuid"]
    for response in (big, small):
        assert response["echoed"] and response["exit_code"] == 0
        _clean(response)
    # the big body went past the window: the host granted credit, the switch granted back
    assert big["body_chunks"] > big["window"]
    assert big["credits"] >= big["body_chunks"] - big["window"]
    assert big["granted"] > 0
    assert summary["echo_stray"] == []
    assert summary["state_answer"] is None  # RELAY_STATE is kept, never answered (RLY-4)


def test_frames_in_the_wrong_direction_close_the_link(summary: dict[str, Any]) -> None:
    wrong = summary["wrong_way"]
    for case in ("relay_notify", "hello", "unknown_policy"):  # RLY-9
        assert wrong[case] == {"closed": True, "frames_before_close": []}, case
    assert wrong["hello_first"] == "RELAY_NOTIFY"
    assert summary["last_link"] == "RELAY_NOTIFY"  # the host serves the next link
    assert summary["last_echo"]["echoed"]
    _clean(summary["last_echo"])


def test_a_peer_call_of_the_hosts_cartridge_is_served_by_the_switch(
    summary: dict[str, Any],
) -> None:
    peer = summary["peer"]
    assert peer["cap"] == "cap:echo"  # the cartridge's own peer REQ came up the link
    assert peer["frames"] == ["REQ", "STREAM_START", "CHUNK", "STREAM_END", "END"]
    assert peer["seq_wrong"] == 0 and peer["xid_wrong"] == 0
    assert peer["result"] == "js:ping"  # this switch's answer went down and out
    _clean(peer["response"])
    assert peer["stray"] == []


def test_a_cancel_ends_the_request_with_an_err_keeping_its_routing_id(
    summary: dict[str, Any],
) -> None:
    cancel = summary["cancel"]
    assert cancel["err"] == "CANCELLED" and cancel["message"] == "Cancelled by user"
    assert cancel["xid_wrong"] == 0 and cancel["seq_wrong"] == 0
    assert cancel["stray"] == []
