"""The compiled codec fast paths (``_speedups.c``) against the pure-Python codec.

The C code may only ever answer "this frame" where the Python code gives the same frame, and
"ask Python" otherwise; errors it raises come from the same Python callables. These tests run
every recorded vector, mutated vectors and random CBOR maps through both paths and demand the
same frame, the same bytes, or the same error (type and message). The rest of the suite runs
with the compiled paths on (when built); one test reruns the codec suites with them off.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cbor2
import pytest
from _frame_vectors import all_frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import (
    Frame,
    FrameDecoder,
    FrameType,
    MessageId,
    ProtocolError,
    _codec,
    decode_frame,
    encode_frame,
)
from cartridge_runtime.protocol._validate import PRESENCE_CHECKED, validate_frame

ROOT = Path(__file__).resolve().parents[2]
BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
needs_c = pytest.mark.skipif(not BUILT, reason="the C fast paths are not built here")
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RAWS = [vf.raw for vf in all_frames() if vf.raw is not None]


@contextmanager
def pure() -> Iterator[None]:
    """The pure-Python codec for the duration (the compiled hooks switched off)."""
    saved = (
        _codec._c_map_to_frame,
        _codec._c_decode_direct,
        _codec._c_encode_small,
        _codec._c_take_frame,
        _codec._c_take_frames,
        _codec._c_scan_prefixes,
    )
    _codec._c_map_to_frame = _codec._c_decode_direct = _codec._c_scan_prefixes = None
    _codec._c_encode_small = _codec._c_take_frame = _codec._c_take_frames = None
    try:
        yield
    finally:
        (
            _codec._c_map_to_frame,
            _codec._c_decode_direct,
            _codec._c_encode_small,
            _codec._c_take_frame,
            _codec._c_take_frames,
            _codec._c_scan_prefixes,
        ) = saved


def outcome(fn: Callable[[], Any]) -> Any:
    """What ``fn()`` gives: its value, or ("raised", exception type, message)."""
    try:
        return fn()
    except Exception as exc:  # compared, never swallowed: the caller asserts on it
        return ("raised", type(exc), str(exc))


def both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    compiled = outcome(fn)
    with pure():
        python = outcome(fn)
    return compiled, python


@needs_c
def test_the_compiled_paths_are_in_use() -> None:
    # Built here and not switched off: the suite exercises them (the next test turns them off).
    assert os.environ.get(_codec.PURE_PYTHON_ENV) or _codec.speedups_enabled()


def test_the_environment_switch_turns_them_off() -> None:
    code = "from cartridge_runtime.protocol import _codec; print(_codec.speedups_enabled())"
    env = dict(os.environ, **{_codec.PURE_PYTHON_ENV: "1"})
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@needs_c
@pytest.mark.parametrize("raw", RAWS, ids=range(len(RAWS)))
def test_vectors_decode_and_encode_the_same(raw: bytes) -> None:
    compiled, python = both(lambda: decode_frame(raw))
    assert compiled == python
    assert isinstance(compiled, Frame)
    assert list(compiled.__dict__) == list(python.__dict__)  # same fields, same wire order
    for seq in (None, 7):
        c_bytes, p_bytes = both(lambda seq=seq: encode_frame(compiled, seq=seq))
        assert c_bytes == p_bytes
    assert encode_frame(compiled) == raw


@needs_c
@FAST
@given(raw=st.sampled_from([r for r in RAWS if len(r) < 4096]), data=st.data())
def test_mutated_vectors_give_the_same_frame_or_error(raw: bytes, data: st.DataObject) -> None:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        i = data.draw(st.integers(min_value=4, max_value=len(buf) - 1))
        buf[i] = data.draw(st.integers(min_value=0, max_value=255))
    mutated = bytes(buf[:4]) + bytes(buf[4:])
    compiled, python = both(lambda: decode_frame(mutated))
    assert compiled == python
    if isinstance(python, tuple):
        assert issubclass(python[1], ProtocolError)


_values = st.one_of(
    st.integers(min_value=-(1 << 65), max_value=1 << 65),
    st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19]),
    st.text(max_size=8),
    st.binary(max_size=20),
    st.binary(min_size=16, max_size=16),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=2),
)
_keys = st.one_of(st.integers(min_value=-2, max_value=40), st.text(max_size=3), st.booleans())


@st.composite
def frame_like_maps(draw: st.DrawFn) -> dict[Any, Any]:
    """Maps near a valid frame: the head keys usually right, the rest anything."""
    m: dict[Any, Any] = {}
    if draw(st.booleans()):
        m[0] = draw(st.sampled_from([2, 1, -1, "2", None]))
    if draw(st.integers(0, 9)):
        m[1] = draw(st.sampled_from([int(t) for t in FrameType] + [99, -3, "x", None]))
    if draw(st.integers(0, 9)):
        m[2] = draw(st.one_of(st.binary(min_size=16, max_size=16), st.integers(0, 9), _values))
    if draw(st.integers(0, 4)):
        m[3] = draw(st.one_of(st.integers(0, 5), _values))
    extra = draw(st.dictionaries(_keys, _values, max_size=6))
    for k, v in extra.items():
        m.setdefault(k, v)
    if draw(st.booleans()):
        m = dict(sorted(m.items(), key=lambda kv: (type(kv[0]) is not int, str(kv[0]))))
    return m


@needs_c
@FAST
@given(m=frame_like_maps())
def test_random_maps_build_the_same_frame_or_error(m: dict[Any, Any]) -> None:
    compiled, python = both(lambda: _codec.map_to_frame(dict(m)))
    assert compiled == python
    if isinstance(python, Frame):
        assert list(compiled.__dict__) == list(python.__dict__)
    # And through the whole small-body path, from bytes.
    try:
        body = cbor2.dumps(m)
    except (TypeError, ValueError, cbor2.CBOREncodeError):
        return
    wire = len(body).to_bytes(4, "big") + body
    compiled, python = both(lambda: decode_frame(wire))
    assert compiled == python


@needs_c
def test_ids_are_shared_through_the_cache_on_both_paths() -> None:
    rid = MessageId(bytes(range(16)))
    wire = encode_frame(Frame(frame_type=FrameType.END, id=rid))
    first = decode_frame(wire)
    with pure():
        second = decode_frame(wire)
    assert first.id == second.id == rid
    assert first.id is second.id  # one MessageId object per id value


@needs_c
def test_an_oversize_frame_is_still_refused_by_name() -> None:
    frame = Frame(frame_type=FrameType.LOG, id=MessageId(1), meta={"level": "info", "m": "x" * 200})
    compiled, python = both(lambda: encode_frame(frame, max_frame=64))
    assert compiled == python
    assert compiled[0] == "raised" and "exceeds max_frame" in compiled[2]


@needs_c
@pytest.mark.slow
def test_codec_suites_pass_on_the_pure_python_path() -> None:
    env = dict(os.environ, **{_codec.PURE_PYTHON_ENV: "1"})
    suites = [
        "tests/protocol/test_codec.py",
        "tests/protocol/test_frame_vectors.py",
        "tests/protocol/test_codec_fuzz.py",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suites],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(),  # NaN and the infinities included: cbor2 writes them in half precision
    st.text(max_size=10),
    st.binary(max_size=10),
)
cbor_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
    ),
    max_leaves=12,
)
RID = bytes(range(16))


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself (frames holding NaN compare unequal to themselves)."""
    return a == b or repr(a) == repr(b)


@needs_c
@FAST
@given(meta=st.dictionaries(st.text(max_size=6), cbor_values, max_size=4), seq=st.integers(0, 9))
def test_meta_of_any_shape_encodes_to_the_same_bytes(meta: dict[str, Any], seq: int) -> None:
    frame = Frame(frame_type=FrameType.END, id=MessageId(RID), meta=meta)
    compiled, python = both(lambda: encode_frame(frame, seq=seq))
    assert compiled == python


@needs_c
@FAST
@given(meta=cbor_values, canonical=st.booleans())
def test_meta_of_any_shape_decodes_to_the_same_frame(meta: Any, canonical: bool) -> None:
    # canonical=True writes floats in their shortest form (half and single precision too).
    body = cbor2.dumps({0: 2, 1: int(FrameType.END), 2: RID, 3: 0, 5: meta}, canonical=canonical)
    wire = len(body).to_bytes(4, "big") + body
    compiled, python = both(lambda: decode_frame(wire))
    assert _same(compiled, python)


# CBOR the direct reader leaves to cbor2: each must still decode the same on both paths.
_META_BODIES = {
    "indefinite array": b"\xa1\x61a\x9f\x01\x02\xff",
    "indefinite text": b"\xa1\x61a\x7f\x61b\x61c\xff",
    "tag 1 (epoch time)": b"\xa1\x61a\xc1\x1a\x00\x01\x00\x00",
    "undefined": b"\xa1\x61a\xf7",
    "simple value 16": b"\xa1\x61a\xf0",
    "half float": b"\xa1\x61a\xf9\x3c\x00",
    "single float": b"\xa1\x61a\xfa\x3f\xc0\x00\x00",
    "integer key": b"\xa1\x01\x02",
    "array key": b"\xa1\x81\x01\x02",
    "invalid UTF-8": b"\xa1\x61a\x62\xff\xfe",
    "non-shortest int": b"\xa1\x61a\x18\x05",
    "-2**64": b"\xa1\x61a\x3b\xff\xff\xff\xff\xff\xff\xff\xff",
    "truncated": b"\xa1\x61a\x62\x61",
    "duplicate key": b"\xa2\x61a\x01\x61a\x02",
}


@needs_c
@pytest.mark.parametrize("meta", list(_META_BODIES.values()), ids=list(_META_BODIES))
def test_cbor_outside_the_direct_reader_decodes_the_same(meta: bytes) -> None:
    head = cbor2.dumps({0: 2, 1: int(FrameType.END), 2: RID, 3: 0})
    body = bytes([head[0] + 1]) + head[1:] + b"\x05" + meta  # one more entry: key 5
    wire = len(body).to_bytes(4, "big") + body
    compiled, python = both(lambda: decode_frame(wire))
    assert _same(compiled, python)


@needs_c
@pytest.mark.parametrize("extra", [b"", b"\x00", b"\xa0"], ids=["exact", "trailing", "two maps"])
def test_trailing_bytes_are_refused_the_same_way(extra: bytes) -> None:
    body = cbor2.dumps({0: 2, 1: int(FrameType.END), 2: RID, 3: 0}) + extra
    wire = len(body).to_bytes(4, "big") + body
    compiled, python = both(lambda: decode_frame(wire))
    assert compiled == python
    assert isinstance(compiled, Frame) == (not extra)


@pytest.mark.parametrize("ft", list(PRESENCE_CHECKED), ids=lambda t: t.name)
def test_presence_checked_types_need_exactly_those_fields(ft: FrameType) -> None:
    # The compiled path skips the Python check when these fields are present: that is only
    # right if the check asks for nothing else, and fails when any one of them is missing.
    values: dict[str, Any] = {
        "stream_id": "s",
        "media_urn": "media:",
        "chunk_index": 0,
        "checksum": 1,
        "credit": 1,
    }
    needed = PRESENCE_CHECKED[ft]
    full = Frame(frame_type=ft, id=MessageId(1), **{k: values[k] for k in needed})
    validate_frame(full)  # passes with exactly these fields
    for missing in needed:
        partial = Frame(
            frame_type=ft, id=MessageId(1), **{k: values[k] for k in needed if k != missing}
        )
        with pytest.raises(ProtocolError):
            validate_frame(partial)


_ids = st.one_of(
    st.binary(min_size=16, max_size=16).map(MessageId),
    st.integers(0, (1 << 64) - 1).map(MessageId),
)


@st.composite
def any_frames(draw: st.DrawFn) -> Frame:
    """Frames of every type with any mix of optional fields, values near the edges included
    (payloads on both sides of the small-frame limit, big ints, text of any width)."""
    fields: dict[str, Any] = {
        "frame_type": draw(st.sampled_from(list(FrameType))),
        "id": draw(_ids),
        "seq": draw(st.integers(0, (1 << 64) - 1)),
    }
    optional: dict[str, Any] = {
        "content_type": st.text(max_size=8),
        "meta": st.dictionaries(st.text(max_size=6), cbor_values, max_size=3),
        "payload": st.one_of(st.binary(max_size=40), st.binary(min_size=4090, max_size=4100)),
        "len": st.integers(0, 1 << 40),
        "offset": st.integers(0, 1 << 40),
        "eof": st.booleans(),
        "cap": st.text(max_size=12),
        "stream_id": st.text(max_size=12),
        "media_urn": st.text(max_size=12),
        "routing_id": _ids,
        "chunk_index": st.integers(0, (1 << 64) - 1),
        "chunk_count": st.integers(0, 1 << 20),
        "checksum": st.integers(0, (1 << 64) - 1),
        "is_sequence": st.booleans(),
        "credit": st.integers(0, 1 << 20),
        "unbounded": st.booleans(),
        "output": st.text(max_size=8),
    }
    for name, strategy in optional.items():
        if draw(st.integers(0, 3)) == 0:
            fields[name] = draw(strategy)
    return Frame(**fields)


@needs_c
@FAST
@given(frame=any_frames(), seq=st.one_of(st.none(), st.integers(0, (1 << 64) - 1)))
def test_any_frame_encodes_to_the_same_bytes_or_error(frame: Frame, seq: int | None) -> None:
    compiled, python = both(lambda: encode_frame(frame, seq=seq))
    assert _same(compiled, python)
    compiled, python = both(lambda: encode_frame(frame, max_frame=60, seq=seq))
    assert _same(compiled, python)


def _decoder_run(blocks: list[bytes], max_frame: int) -> list[Any]:
    """What a FrameDecoder gives for ``blocks`` then EOF: every frame, then an error, if any."""
    dec = FrameDecoder(max_frame)
    got: list[Any] = []
    try:
        for block in [*blocks, b""]:
            dec.feed(block)
            while (frame := dec.next_frame()) is not None:
                got.append(frame)
    except Exception as exc:  # compared, never swallowed: the caller asserts on it
        got.append(("raised", type(exc), str(exc)))
    return got


@needs_c
@FAST
@given(
    picks=st.lists(st.sampled_from([r for r in RAWS if len(r) < 4096]), min_size=1, max_size=4),
    data=st.data(),
)
def test_the_decoder_gives_the_same_frames_and_errors_on_both_paths(
    picks: list[bytes], data: st.DataObject
) -> None:
    stream = bytearray(b"".join(picks))
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
        i = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
        stream[i] = data.draw(st.integers(min_value=0, max_value=255))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=3)))
    blocks = [bytes(stream[a:b]) for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    max_frame = data.draw(st.sampled_from([1 << 20, 64]))
    compiled, python = both(lambda: _decoder_run(blocks, max_frame))
    assert _same(compiled, python)


def _decoder_batch_run(blocks: list[bytes], max_frame: int) -> list[Any]:
    """:func:`_decoder_run` taking the frames in batches (``take_frames``), blocks fed as the
    pump feeds them (a borrowed view of a reused buffer)."""
    dec = FrameDecoder(max_frame)
    got: list[Any] = []
    try:
        for block in [*blocks, b""]:
            if block:
                reused = bytearray(block)
                dec.feed_borrowed(memoryview(reused))
            else:
                dec.feed(block)
            while batch := dec.take_frames():
                got.extend(batch)
            if block:
                dec.release_borrowed()
                reused[:] = b"\xff" * len(reused)  # the buffer is refilled: nothing kept of it
    except Exception as exc:  # compared, never swallowed: the caller asserts on it
        got.append(("raised", type(exc), str(exc)))
    return got


@needs_c
@FAST
@given(
    picks=st.lists(st.sampled_from([r for r in RAWS if len(r) < 4096]), min_size=1, max_size=6),
    data=st.data(),
)
def test_batches_give_the_frames_and_errors_one_frame_at_a_time_gives(
    picks: list[bytes], data: st.DataObject
) -> None:
    stream = bytearray(b"".join(picks))
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
        i = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
        stream[i] = data.draw(st.integers(min_value=0, max_value=255))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=3)))
    blocks = [bytes(stream[a:b]) for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    max_frame = data.draw(st.sampled_from([1 << 20, 64]))
    batched = _decoder_batch_run(blocks, max_frame)
    with pure():
        one_by_one = _decoder_run(blocks, max_frame)
        pure_batched = _decoder_batch_run(blocks, max_frame)
    assert _same(batched, one_by_one)
    assert _same(pure_batched, one_by_one)


@needs_c
def test_a_batch_stops_before_a_bad_frame_and_the_next_call_names_it() -> None:
    good = RAWS[0]
    bad = bytearray(good)
    bad[4] = 0xFF  # not a CBOR map: refused by name, by the Python path
    dec = FrameDecoder(1 << 20)
    dec.feed(good + good + bytes(bad))
    assert len(dec.take_frames()) == 2
    with pytest.raises(ProtocolError):
        dec.take_frames()


_end_fields = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(0, 1),
    st.text(max_size=3),
    st.binary(max_size=2),
)


@needs_c
@FAST
@given(
    fields=st.dictionaries(
        st.sampled_from(["exit_code", "progress", "message", "other"]), _end_fields, max_size=4
    ),
    as_map=st.booleans(),
)
def test_end_meta_is_checked_the_same_on_both_paths(fields: dict[str, Any], as_map: bool) -> None:
    # The compiled reader checks END's usual meta itself (exit_code an int, progress a number,
    # message text); anything else goes to the Python check, which names the mistake.
    meta: Any = fields if as_map else list(fields.items())
    body = cbor2.dumps({0: 2, 1: int(FrameType.END), 2: RID, 3: 0, 5: meta})
    wire = len(body).to_bytes(4, "big") + body
    compiled, python = both(lambda: decode_frame(wire))
    assert _same(compiled, python)
