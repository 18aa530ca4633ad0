"""Properties of cartridge_runtime.urn (hypothesis) and unit tests of the
runtime lookups: handler selection ties, stream matching, output typing."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cartridge_runtime.urn import (
    ADAPTER_SELECTION_CAP,
    DISCARD_CAP,
    IDENTITY_CAP,
    STANDARD_CAPS,
    CapEffect,
    CapKind,
    CapUrn,
    CapUrnError,
    DuplicateKeyError,
    MediaUrn,
    MediaUrnError,
    PrefixMismatchError,
    UrnError,
    find_stream_index,
    infer_output_media,
    is_conformant_output,
    main_output_media,
    media_matches_for_stream,
    select_handler,
)

# --- strategies -------------------------------------------------------------------
_KEYS = st.sampled_from(["a", "b", "x", "ext", "fmt", "enc", "v", "a-b", "a.b", "a/b", "a_b"])
_VALUES = st.sampled_from(["p", "q", "pdf", "utf-8", "1.0", "A b", 'q"t', "x\\y", "a;b", "k=v"])


def _render(value: str) -> str:
    if any(c in ';=" \\' or c.isupper() for c in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


@st.composite
def _tag(draw: st.DrawFn) -> str:
    key = draw(_KEYS)
    if draw(st.booleans()):
        key = key.upper()
    form = draw(st.integers(0, 8))
    value = _render(draw(_VALUES))
    return [
        key,
        f"?{key}",
        f"!{key}",
        f"{key}?",
        f"{key}=*",
        f"{key}?={value}",
        f"{key}!={value}",
        f"{key}={value}",
        f"!{key}={value}",
    ][form]


@st.composite
def media_texts(draw: st.DrawFn) -> str:
    """Media URN spellings from a safe alphabet (their canonical text always re-parses)."""
    tags = draw(st.lists(_tag(), max_size=4))
    return "media:" + ";".join(tags)


def _media(text: str) -> MediaUrn | None:
    try:
        return MediaUrn.parse(text)
    except UrnError:
        return None


@st.composite
def cap_texts(draw: st.DrawFn) -> str:
    parts = [t for t in draw(st.lists(_tag(), max_size=2)) if t.lower().split("=")[0] != "in"]
    for axis in ("in", "out"):
        if draw(st.booleans()):
            inner = draw(media_texts())
            parts.append(f"{axis}={_render(inner)}")
    effect = draw(
        st.sampled_from(["", "effect=none", "effect=patch", "?effect", "effect=declared"])
    )
    if effect:
        parts.append(effect)
    parts = draw(st.permutations(parts))
    return "cap:" + ";".join(parts)


def _cap(text: str) -> CapUrn | None:
    try:
        return CapUrn.parse(text)
    except UrnError:
        return None


# --- media properties ---------------------------------------------------------------
@given(media_texts())
def test_media_canonical_reparses_to_equal_urn(text: str) -> None:
    urn = _media(text)
    if urn is None:
        return
    again = MediaUrn.parse(urn.text)
    assert again == urn
    assert hash(again) == hash(urn)
    assert again.text == urn.text
    assert dict(again.tags) == dict(urn.tags)
    assert again.is_equivalent(urn)


@given(media_texts(), media_texts())
def test_media_relation_laws(ta: str, tb: str) -> None:
    a, b = _media(ta), _media(tb)
    if a is None or b is None:
        return
    assert a.conforms_to(a) and a.satisfies(a) and a.is_equivalent(a)
    assert a.is_equivalent(b) == b.is_equivalent(a)
    assert a.is_comparable(b) == b.is_comparable(a)
    assert a.meets(b) == b.meets(a)
    assert a.conforms_to(b) == b.accepts(a)
    assert a.is_equivalent(b) == (a.conforms_to(b) and b.conforms_to(a))
    assert a.is_comparable(b) == (a.conforms_to(b) or b.conforms_to(a))
    if a.conforms_to(b):
        assert a.meets(b) and a.satisfies(b)
    if a.satisfies(b):
        assert a.may_satisfy(b)
    if a == b:
        assert a.is_equivalent(b)
    assert MediaUrn.parse("media:").accepts(a)


@settings(max_examples=300)
@given(st.text(max_size=30))
def test_parse_arbitrary_text_raises_only_urn_errors(text: str) -> None:
    for parse in (MediaUrn.parse, CapUrn.parse):
        with contextlib.suppress(UrnError):
            parse(text)


# --- cap properties ---------------------------------------------------------------------
@given(cap_texts())
def test_cap_canonical_reparses_and_dispatch_is_reflexive(text: str) -> None:
    cap = _cap(text)
    if cap is None:
        return
    again = CapUrn.parse(cap.text)
    assert again == cap and hash(again) == hash(cap)
    assert again.in_spec == cap.in_spec and again.out_spec == cap.out_spec
    assert again.effect is cap.effect
    assert cap.is_dispatchable(cap)
    assert cap.is_equivalent(again)


@given(cap_texts(), cap_texts())
def test_cap_relation_laws(ta: str, tb: str) -> None:
    a, b = _cap(ta), _cap(tb)
    if a is None or b is None:
        return
    assert a.is_equivalent(b) == b.is_equivalent(a)
    assert a.is_comparable(b) == b.is_comparable(a)
    assert a.conforms_to(b) == b.accepts(a)
    if a.is_dispatchable(b):
        assert a.may_dispatch(b)
    if a.is_equivalent(b):
        assert a.is_comparable(b)


# --- unit: values and errors ----------------------------------------------------------------
def test_values_are_immutable_and_hashable() -> None:
    a = MediaUrn.parse("media:b;a=1")
    assert a == MediaUrn.parse("media:a=1;b") and len({a, MediaUrn.parse("media:a=1;b")}) == 1
    assert a != MediaUrn.parse("media:a=1;b;?c")  # == is canonical text...
    assert a.is_equivalent(MediaUrn.parse("media:a=1;b;?c"))  # ...semantics ignore ``?``
    with pytest.raises(AttributeError):
        a.text = "media:"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.tags["a"] = "2"  # type: ignore[index]


def test_cap_fields() -> None:
    cap = CapUrn.parse('cap:disbind;in="media:document;ext=pdf";out="media:enc=utf-8;page"')
    assert cap.in_spec == MediaUrn.parse("media:ext=pdf;document")
    assert cap.out_spec.text == "media:enc=utf-8;page"
    assert cap.effect is CapEffect.DECLARED and cap.kind is CapKind.TRANSFORM
    assert dict(cap.tags) == {"disbind": "*"}
    assert cap.get_tag("IN") == "media:document;ext=pdf"
    assert CapUrn.parse("cap:effect").text == "cap:?effect"
    assert CapUrn.parse(IDENTITY_CAP).kind is CapKind.IDENTITY
    assert CapUrn.parse(DISCARD_CAP).kind is CapKind.SINK


def test_error_types_and_reasons() -> None:
    with pytest.raises(DuplicateKeyError) as dup:
        MediaUrn.parse("media:x;X")
    assert dup.value.reason == "duplicate_key" and isinstance(dup.value, ValueError)
    with pytest.raises(MediaUrnError) as void:
        MediaUrn.parse("media:void;?x")
    assert void.value.reason == "void_not_atomic"
    with pytest.raises(CapUrnError) as bad_in:
        CapUrn.parse("cap:in=?;x")
    assert bad_in.value.reason == "invalid_in_spec"
    assert bad_in.value.__cause__ is bad_in.value.cause
    with pytest.raises(PrefixMismatchError):
        MediaUrn.parse("media:x").conforms_to(CapUrn.parse(IDENTITY_CAP))  # type: ignore[arg-type]


# --- unit: select_handler -------------------------------------------------------------------
def test_select_exact_text_wins_without_parsing() -> None:
    # The exact-text shortcut even returns a registration that does not parse.
    assert select_handler(["not a urn", "cap:x"], "not a urn") == 0
    # ...and one that would not be dispatchable.
    assert select_handler(["cap:x;y", "cap:x"], "cap:x;y") == 0


def test_select_first_registered_wins_ties() -> None:
    # Two equivalent spellings and an exact duplicate score alike: first position wins.
    regs = ["cap:x;in=media:pdf", 'cap:in="media:pdf";x', "cap:x;in=media:pdf;?z"]
    assert select_handler(regs, "cap:in=media:pdf;x=*") == 0
    assert select_handler(regs[::-1], "cap:in=media:pdf;x=*") == 0


def test_select_prefers_exact_then_refinement_then_fallback() -> None:
    regs = ["cap:x", "cap:x;y", "cap:x;y;z"]
    assert select_handler(regs, "cap:x;y=*") == 1  # exact score
    assert select_handler(regs[:1] + regs[2:], "cap:x;y=*") == 1  # refinement beats fallback
    assert select_handler(["cap:q"], "cap:x") is None
    assert select_handler(regs, "garbage") is None


def test_select_reregistration_keeps_position_takes_last_handler() -> None:
    regs = ["cap:x;y", "cap:x", "cap:x;y"]
    assert select_handler(regs, "cap:x;y") == 2  # exact text: the dict's current handler
    assert select_handler(regs, "cap:y=*;x") == 2  # ranked: first position, last handler


def test_select_standard_caps_win_ties() -> None:
    regs = [*STANDARD_CAPS, "cap:effect=none;?z"]  # equivalent to identity, same score
    assert select_handler(regs, 'cap:in="media:ext=pdf";effect=none') == 0
    assert select_handler(regs[::-1], 'cap:in="media:ext=pdf";effect=none') == 0
    assert select_handler([*STANDARD_CAPS, "cap:out=media:void;x"], "cap:out=media:void") == 1
    adapter = CapUrn.parse(ADAPTER_SELECTION_CAP)
    assert select_handler(list(STANDARD_CAPS), adapter) == 2
    assert select_handler([CapUrn.parse(t) for t in STANDARD_CAPS], adapter.text) == 2


# --- unit: stream matching and output typing ------------------------------------------------
def test_stream_matching_is_equivalence() -> None:
    assert media_matches_for_stream("media:a", "media:a;?b")
    assert not media_matches_for_stream("media:document", "media:ext=pdf;document")
    assert not media_matches_for_stream("media:a", "not a urn")
    streams = ["junk", "media:ext=pdf;document", "media:document;?x", "media:document"]
    assert find_stream_index(streams, "media:document") == 2
    assert find_stream_index(streams, MediaUrn.parse("media:image")) is None
    assert find_stream_index(streams, "junk") is None


def test_main_output_media_by_effect() -> None:
    declared = CapUrn.parse('cap:in="media:document;ext=pdf";out="media:enc=utf-8;page"')
    assert main_output_media(declared).text == "media:enc=utf-8;page"
    none = CapUrn.parse('cap:effect=none;in="media:ext=pdf"')
    assert main_output_media(none).text == "media:ext=pdf"
    patch = CapUrn.parse('cap:effect=patch;in="media:a;fmt=json";out="media:fmt=yaml"')
    assert main_output_media(patch).text == "media:fmt=yaml"  # keys in->out differ: dropped
    with pytest.raises(CapUrnError) as any_effect:
        main_output_media(CapUrn.parse("cap:?effect"))
    assert any_effect.value.reason == "unsupported_effect"


def test_infer_output_media_from_runtime_input() -> None:
    patch = CapUrn.parse('cap:effect=patch;in="media:fmt=json";out="media:fmt=yaml"')
    got = infer_output_media(patch, MediaUrn.parse("media:fmt=json;record"))
    assert got.text == "media:fmt=yaml;record"
    assert is_conformant_output(patch, MediaUrn.parse("media:fmt=json;record"), got)
    with pytest.raises(CapUrnError) as mismatch:
        infer_output_media(patch, MediaUrn.parse("media:fmt=csv"))
    assert mismatch.value.reason == "runtime_input_mismatch"
    declared = CapUrn.parse('cap:out="media:image"')
    assert is_conformant_output(
        declared, MediaUrn.parse("media:"), MediaUrn.parse("media:ext=png;image")
    )
    assert not is_conformant_output(declared, MediaUrn.parse("media:"), MediaUrn.parse("media:"))
