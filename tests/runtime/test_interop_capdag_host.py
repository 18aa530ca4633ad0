"""capdag 1.524.58's ``CartridgeHost`` (test-only) drives ``cartridges/interop.py``.

The host spawns the script itself (``python3 interop.py``, found on PATH, so the test puts this
virtualenv's interpreter first), runs its HELLO, identity check and POLICY, then forwards the
requests of a small engine-role driver (:mod:`tests._capdag_driver`). Everything that reaches
the driver went through the reference host unchanged.

One host and one cartridge process serve the whole module. Every wait has a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("capdag")

from _capdag_driver import CapdagEngine

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cartridges" / "interop.py"
TIMEOUT = 30.0
#: Large enough to need many chunks and credit grants both ways, small enough for the
#: reference host's ~4 MB/s.
ECHO_SIZE = 4 * 1024 * 1024

TEXT = "media:enc=utf-8"
JSON_RECORD = "media:fmt=json;record"


def _manifest() -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "manifest"], capture_output=True, timeout=TIMEOUT, check=True
    )
    manifest: dict[str, object] = json.loads(result.stdout)
    return manifest


def _urns(manifest: dict[str, object]) -> dict[str, str]:
    groups = manifest["cap_groups"]
    assert isinstance(groups, list)
    return {cap["aliases"][0]: cap["urn"] for group in groups for cap in group["caps"]}


@pytest.fixture(scope="module")
def manifest() -> dict[str, object]:
    return _manifest()


@pytest.fixture(scope="module")
def urns(manifest: dict[str, object]) -> dict[str, str]:
    return _urns(manifest)


@pytest.fixture(scope="module")
def engine(manifest: dict[str, object]) -> Iterator[CapdagEngine]:
    """A CartridgeHost with interop.py registered, driven from the engine side."""
    old_path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + old_path
    driver = CapdagEngine(str(SCRIPT), manifest)
    try:
        yield driver
    finally:
        driver.close()
        os.environ["PATH"] = old_path


def test_reference_validation_accepts_every_cap(manifest: dict[str, object]) -> None:
    """The rules the host applies at spawn (RULE1..22), called directly for a precise failure."""
    from capdag.cap.definition import Cap
    from capdag.cap.validation import validate_cap_definition

    from cartridge_runtime.manifest import Manifest

    Manifest.from_dict(manifest, strict=True)  # our own rules as well
    groups = manifest["cap_groups"]
    assert isinstance(groups, list)
    for group in groups:
        for cap in group["caps"]:
            validate_cap_definition(Cap.from_dict(cap))


def test_echo_several_mib_byte_exact(engine: CapdagEngine, urns: dict[str, str]) -> None:
    data = os.urandom(ECHO_SIZE)
    response = engine.call(urns["echo"], [("media:", data)], timeout=TIMEOUT)
    assert response.error is None, response.error
    main = response.main
    assert main.media_urn == "media:"
    assert main.ended and main.chunk_count == len(main.values)
    assert main.data() == data
    assert response.end_meta == {"exit_code": 0, "progress": 1.0}


def test_words_is_a_sequence_of_text_items(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(urns["words"], [(TEXT, b"one two  three\nfour")])
    assert response.error is None, response.error
    main = response.main
    assert main.is_sequence
    assert main.media_urn == "media:enc=utf-8;list"
    assert main.values == [b"one", b"two", b"three", b"four"]


def test_fail_keeps_code_and_class(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(urns["fail"], [(TEXT, b"kaboom")])
    assert response.error is not None
    assert response.error["code"] == "INTEROP_FAIL"
    assert response.error["attribution_class"] == "input"
    assert "kaboom" in response.error["message"]
    assert "arg_urn" not in response.error
    assert response.streams == {}


def test_split_has_two_outputs(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(urns["split"], [(TEXT, "héllo".encode())])
    assert response.error is None, response.error
    assert len(response.streams) == 2
    main = response.main
    assert main.media_urn == TEXT
    assert main.data().decode() == "HÉLLO"
    stats = response.output(JSON_RECORD)
    assert stats.media_urn == JSON_RECORD
    assert json.loads(stats.data()) == {"length": 5}
    # Main output first, then the declared second output.
    ids = [s.stream_id for s in response.streams.values()]
    assert ids == [main.stream_id, stats.stream_id]


def test_concat_two_inputs_with_different_media(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(
        urns["concat"], [("media:enc=utf-8;suffix", b" world"), (TEXT, b"hello")]
    )
    assert response.error is None, response.error
    assert response.main.data() == b"hello world"


def test_concat_missing_second_input_is_an_input_error(
    engine: CapdagEngine, urns: dict[str, str]
) -> None:
    response = engine.call(urns["concat"], [(TEXT, b"hello")])
    assert response.error is not None
    assert response.error["code"] == "MISSING_INPUT"
    assert response.error["attribution_class"] == "input"
    assert "media:enc=utf-8;suffix" in response.error["message"]


def test_progress_frames_and_logs(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(urns["progress"], [(JSON_RECORD, b'{"steps": 4}')])
    assert response.error is None, response.error
    progress = [log for log in response.logs if log.get("level") == "progress"]
    infos = [log for log in response.logs if log.get("level") == "info"]
    assert [p["progress"] for p in progress] == [0.0, 0.25, 0.5, 0.75]
    assert all("attribution_class" not in p for p in progress)
    assert [i["message"] for i in infos] == [f"did step {n}" for n in range(1, 5)]
    assert all(i["attribution_class"] == "internal" for i in infos)
    assert response.main.data() == b"completed"
    assert response.end_meta == {"exit_code": 0, "progress": 1.0}


def test_metrics_and_traces_pass_the_reference_host_unchanged(
    engine: CapdagEngine, urns: dict[str, str]
) -> None:
    response = engine.call(urns["progress"], [(JSON_RECORD, b'{"steps": 2, "telemetry": true}')])
    assert response.error is None, response.error
    traces = [log for log in response.logs if log.get("level") == "trace"]
    metrics = [log for log in response.logs if log.get("level") == "metric"]
    assert [t["trace"] for t in traces] == [
        {"name": "step", "attributes": {"index": n}} for n in (1, 2)
    ]
    assert [m["metric"] for m in metrics] == [
        {"name": "steps", "value": 1, "labels": {"kind": "progress"}}
    ] * 2
    assert all(
        log["attribution_class"] == "internal" and log["message"] for log in traces + metrics
    )
    assert response.main.data() == b"completed"


def test_indeterminate_progress_is_a_valid_progress_log_for_the_reference_host(
    engine: CapdagEngine, urns: dict[str, str]
) -> None:
    response = engine.call(urns["progress"], [(JSON_RECORD, b'{"steps": 2, "spin": true}')])
    assert response.error is None, response.error
    progress = [log for log in response.logs if log.get("level") == "progress"]
    assert progress[0]["message"] == "warming up" and progress[0]["indeterminate"] is True
    assert [p["progress"] for p in progress] == [0.0, 0.0, 0.5]
    assert response.main.data() == b"completed"


def test_sha256_and_generate(engine: CapdagEngine, urns: dict[str, str]) -> None:
    data = b"interop" * 100_000
    response = engine.call(urns["sha256"], [("media:", data)])
    assert response.main.data().decode() == hashlib.sha256(data).hexdigest()
    response = engine.call(urns["generate"], [(JSON_RECORD, b'{"size": 1000001}')])
    assert response.error is None, response.error
    assert response.main.data() == (b"ABCDEFGH" * 125_001)[:1_000_001]


def test_double_and_file_info(engine: CapdagEngine, urns: dict[str, str]) -> None:
    response = engine.call(urns["double"], [(JSON_RECORD, b'{"value": 21}')])
    assert response.main.data() == b"42"
    assert response.main.media_urn == "media:fmt=json;numeric"
    content = b"file-bytes" * 1000
    response = engine.call(urns["file-info"], [("media:", content)])
    assert json.loads(response.main.data()) == {
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
    }


def test_host_stayed_healthy(engine: CapdagEngine) -> None:
    assert engine.host_error is None
    assert engine.relay_notifies >= 1
