"""The URN editing API under the reference's names: edits, the least upper
bound, the structural order, the media predicates and the builders for a file extension.

Unit tests pin the behaviour; the ``interop`` tests run the same operation on generated inputs
through the reference (capdag 1.524.58) and compare the results (value, or refusal).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cartridge_runtime.urn import (
    CapEffect,
    CapUrn,
    CapUrnError,
    EmptyTagComponentError,
    InvalidCharacterError,
    MediaUrn,
    MediaUrnError,
    NumericKeyError,
    UrnError,
    audio_media_urn_for_ext,
    file_media_urn_for_ext,
    image_media_urn_for_ext,
    text_media_urn_for_ext,
)

M = MediaUrn.parse
C = CapUrn.parse


# --- media edits --------------------------------------------------------------------
def test_media_with_tag_adds_replaces_and_keeps_the_original() -> None:
    pdf = M("media:document;ext=pdf")
    assert pdf.with_tag("EXT", "epub") == M("media:document;ext=epub")
    assert pdf.with_tag("textable", "*") == M("media:document;ext=pdf;textable")
    assert pdf.with_tag("lang", "?=fr").text == "media:document;ext=pdf;lang?=fr"
    assert pdf.with_tag("title", "A b").text == 'media:document;ext=pdf;title="A b"'
    assert pdf == M("media:document;ext=pdf")


def test_media_with_tag_refuses_what_the_parser_refuses() -> None:
    urn = M("media:x")
    with pytest.raises(EmptyTagComponentError):
        urn.with_tag("k", "")
    with pytest.raises(InvalidCharacterError):
        urn.with_tag("a;b", "v")
    with pytest.raises(NumericKeyError):
        urn.with_tag("42", "v")
    with pytest.raises(MediaUrnError) as info:
        M("media:void").with_tag("why", "*")
    assert info.value.reason == "void_not_atomic"


def test_media_without_tag() -> None:
    urn = M("media:document;ext=pdf")
    assert urn.without_tag("EXT") == M("media:document")
    assert urn.without_tag("missing") is urn
    assert M("media:x").without_tag("x").is_top()


def test_least_upper_bound() -> None:
    lub = MediaUrn.least_upper_bound
    assert lub([]) == M("media:")
    one = M("media:document;ext=pdf")
    assert lub([one]) is one
    assert lub([one, M("media:document;ext=pdf;x")]) == one
    assert lub([one, M("media:ext=png;image")]) == M("media:")
    assert lub(iter([M("media:a;b=1"), M("media:a;b=2"), M("media:a;c")])) == M("media:a")
    with pytest.raises(UrnError):
        lub([one, "media:x"])  # type: ignore[list-item]


# --- media predicates and the builders -------------------------------------------------
@pytest.mark.parametrize(
    ("text", "true"),
    [
        ("media:ext=png;image", {"is_image", "is_scalar", "is_opaque"}),
        ("media:?image", {"is_image", "is_scalar", "is_opaque"}),
        ("media:fmt=json;list;record", {"is_json", "is_list", "is_record"}),
        ("media:fmt=yaml", {"is_yaml", "is_scalar", "is_opaque"}),
        ("media:fmt=csv;list;record", {"is_csv", "is_list", "is_record"}),
        ("media:integer;numeric", {"is_numeric", "is_scalar", "is_opaque"}),
        ("media:bool;enc=utf-8", {"is_bool", "is_scalar", "is_opaque"}),
        ("media:audio;ext=wav", {"is_audio", "is_scalar", "is_opaque"}),
        ("media:ext=mkv;video", {"is_video", "is_scalar", "is_opaque"}),
        ("media:enc=utf-8;file-path", {"is_file_path", "is_scalar", "is_opaque"}),
        ("media:void", {"is_void", "is_scalar", "is_opaque"}),
        ("media:", {"is_top", "is_scalar", "is_opaque"}),
        ("media:list=x;record=!", {"is_scalar", "is_opaque"}),
    ],
)
def test_media_predicates(text: str, true: set[str]) -> None:
    urn = M(text)
    for name in _PREDICATES:
        assert getattr(urn, name)() == (name in true), name


def test_extension() -> None:
    assert M("media:document;ext=pdf").extension() == "pdf"
    assert M("media:document").extension() is None


def test_builders_for_an_extension() -> None:
    assert file_media_urn_for_ext("PDF") == "media:ext=pdf"
    assert text_media_urn_for_ext("md") == "media:enc=utf-8;ext=md"
    assert image_media_urn_for_ext("png") == "media:ext=png;image"
    assert audio_media_urn_for_ext("wav") == "media:audio;ext=wav"
    assert M(image_media_urn_for_ext("tar.gz")).extension() == "tar.gz"
    for bad in ("", "a;b", "a b", "x=y", "*"):
        with pytest.raises(MediaUrnError) as info:
            file_media_urn_for_ext(bad)
        assert info.value.reason == "invalid_extension"


# --- cap edits ----------------------------------------------------------------------
UPPER = C('cap:in="media:enc=utf-8";op=upper;out="media:enc=utf-8"')


def test_cap_with_and_without_tag() -> None:
    assert UPPER.with_tag("Lang", "fr").get_tag("lang") == "fr"
    assert UPPER.with_tag("op", "lower") == C(
        'cap:in="media:enc=utf-8";op=lower;out="media:enc=utf-8"'
    )
    assert UPPER.without_tag("op") == C('cap:in="media:enc=utf-8";out="media:enc=utf-8"')
    assert UPPER.without_tag("nothing") is UPPER
    for key in ("in", "OUT", "effect"):
        with pytest.raises(CapUrnError) as info:
            UPPER.with_tag(key, "x")
        assert info.value.reason == "structural_key"
        with pytest.raises(CapUrnError) as info:
            UPPER.without_tag(key)
        assert info.value.reason == "structural_key"
    with pytest.raises(CapUrnError) as info:
        UPPER.with_tag("k", "")
    assert info.value.reason == "syntax"
    assert isinstance(info.value.cause, EmptyTagComponentError)
    with pytest.raises(CapUrnError) as info:
        C("cap:op=x").without_tag("op")
    assert info.value.reason == "bare_top"


def test_cap_with_specs_and_effect() -> None:
    cap = UPPER.with_in_spec("media:fmt=json;record").with_out_spec(M("media:ext=pdf"))
    assert cap.in_spec == M("media:fmt=json;record")
    assert cap.out_spec == M("media:ext=pdf")
    assert UPPER.with_in_spec("").in_spec.is_top()
    with pytest.raises(CapUrnError) as info:
        UPPER.with_in_spec("cap:x")
    assert info.value.reason == "invalid_in_spec"
    with pytest.raises(CapUrnError) as info:
        UPPER.with_out_spec("media:void;x")
    assert info.value.reason == "invalid_out_spec"
    assert UPPER.with_effect(CapEffect.NONE).effect is CapEffect.NONE
    with pytest.raises(CapUrnError) as info:
        UPPER.with_out_spec("media:ext=pdf").with_effect(CapEffect.NONE)
    assert info.value.reason == "effect_none_inadmissible"


def test_cap_subset_and_merge() -> None:
    cap = C('cap:a=1;b;c=3;in="media:x"')
    assert cap.subset(["A", "c", "in", "zz"]) == C('cap:a=1;c=3;in="media:x"')
    other = C('cap:c=9;d;out="media:y"')
    merged = cap.merge(other)
    assert merged == C('cap:a=1;b;c=9;d;out="media:y"')
    assert merged.in_spec.is_top()
    with pytest.raises(UrnError):
        cap.merge("cap:x")  # type: ignore[arg-type]


# --- the order ------------------------------------------------------------------------
def test_media_order_is_structural_not_textual() -> None:
    a, b = M("media:file"), M("media:file-path")
    assert a.ordering_key() < b.ordering_key()
    assert a < b and a <= b and b > a and b >= a and not b < a
    # The canonical texts order the other way: ';' sorts after '-'.
    assert M("media:file;x").text > M("media:file-path").text
    assert M("media:file;x") < M("media:file-path")
    assert sorted([b, a]) == [a, b]


def test_cap_order() -> None:
    caps = [
        C("cap:effect=none"),
        C('cap:in="media:b";x'),
        C('cap:in="media:a";out="media:z"'),
        C('cap:in="media:a";x'),
        C('cap:in="media:a";?effect;x'),
    ]
    assert sorted(caps) == [caps[0], caps[3], caps[4], caps[2], caps[1]]
    with pytest.raises(TypeError):
        _ = M("media:") > UPPER


# --- against the reference ---------------------------------------------------------------
_PREDICATES = (
    "is_image",
    "is_json",
    "is_list",
    "is_record",
    "is_numeric",
    "is_void",
    "is_top",
    "is_file_path",
    "is_scalar",
    "is_opaque",
    "is_bool",
    "is_audio",
    "is_video",
    "is_csv",
    "is_yaml",
)

_KEYS = st.sampled_from(
    [
        "a",
        "b",
        "ext",
        "fmt",
        "list",
        "record",
        "image",
        "audio",
        "video",
        "numeric",
        "bool",
        "file",
        "file-path",
        "void",
        "x-y",
        "enc",
    ]
)
_STORED = st.sampled_from(["*", "?", "!", "json", "yaml", "csv", "pdf", "?=p", "!=q", "A b"])


@st.composite
def media_urns(draw: st.DrawFn) -> MediaUrn:
    tags = draw(st.dictionaries(_KEYS, _STORED, max_size=4))
    urn = M("media:")
    for k, v in tags.items():
        with contextlib.suppress(UrnError):
            urn = urn.with_tag(k, v)
    return urn


@st.composite
def cap_urns(draw: st.DrawFn) -> CapUrn:
    tags = draw(st.dictionaries(st.sampled_from(["op", "a", "b", "lang"]), _STORED, max_size=3))
    text = "cap:" + ";".join(
        [f'in="{draw(media_urns()).text}"', f'out="{draw(media_urns()).text}"']
        + [M("media:").with_tag(k, v).text[len("media:") :] for k, v in tags.items()]
        + [draw(st.sampled_from(["", "effect=patch", "?effect", "effect=none"]))]
    ).rstrip(";")
    try:
        return C(text)
    except UrnError:
        return C("cap:op=fallback")


def _ref() -> Any:
    capdag_media = pytest.importorskip("capdag.urn.media_urn")
    capdag_cap = pytest.importorskip("capdag.urn.cap_urn")
    return capdag_media, capdag_cap


def _both(ours: Callable[[], Any], theirs: Callable[[], Any]) -> tuple[Any, Any]:
    """Each side's result, or the string "refused" when it raised."""
    try:
        a = ours()
    except UrnError:
        a = "refused"
    try:
        b = theirs()
    except Exception:
        b = "refused"
    return a, b


def _text(value: Any) -> Any:
    return value if value == "refused" else str(value)


@pytest.mark.interop
@settings(max_examples=150, deadline=None)
@given(media_urns(), _KEYS, _STORED)
def test_media_edits_agree_with_the_reference(urn: MediaUrn, key: str, value: str) -> None:
    rm, _ = _ref()
    theirs = rm.MediaUrn.from_string(urn.text)
    assert str(theirs) == urn.text
    a, b = _both(lambda: urn.with_tag(key, value), lambda: theirs.with_tag(key, value))
    assert _text(a) == _text(b)
    a, b = _both(lambda: urn.without_tag(key), lambda: theirs.without_tag(key))
    assert _text(a) == _text(b)
    for name in _PREDICATES:
        assert getattr(urn, name)() == getattr(theirs, name)(), name
    assert urn.extension() == theirs.extension()


@pytest.mark.interop
@settings(max_examples=150, deadline=None)
@given(st.lists(media_urns(), max_size=4))
def test_media_lub_and_order_agree_with_the_reference(urns: list[MediaUrn]) -> None:
    rm, _ = _ref()
    theirs = [rm.MediaUrn.from_string(u.text) for u in urns]
    assert str(MediaUrn.least_upper_bound(urns)) == str(rm.MediaUrn.least_upper_bound(theirs))
    assert [u.text for u in sorted(urns)] == [
        str(t) for t in sorted(theirs, key=lambda t: t.ordering_key())
    ]
    for u, t in zip(urns, theirs, strict=True):
        assert u.ordering_key() == t.ordering_key()


@pytest.mark.interop
@settings(max_examples=150, deadline=None)
@given(
    cap_urns(),
    cap_urns(),
    st.sampled_from(["op", "a", "lang", "in", "out", "effect", "new"]),
    _STORED,
    media_urns(),
    st.lists(st.sampled_from(["op", "a", "b", "in", "zz"]), max_size=3),
)
def test_cap_edits_agree_with_the_reference(
    cap: CapUrn, other: CapUrn, key: str, value: str, media: MediaUrn, keys: list[str]
) -> None:
    _, rc = _ref()
    theirs = rc.CapUrn.from_string(cap.text)
    their_other = rc.CapUrn.from_string(other.text)
    assert str(theirs) == cap.text
    cases = [
        (lambda: cap.with_tag(key, value), lambda: theirs.with_tag(key, value)),
        (lambda: cap.without_tag(key), lambda: theirs.without_tag(key)),
        (lambda: cap.with_in_spec(media.text), lambda: theirs.with_in_spec(media.text)),
        (lambda: cap.with_out_spec(media.text), lambda: theirs.with_out_spec(media.text)),
        (lambda: cap.merge(other), lambda: theirs.merge(their_other)),
        (lambda: cap.subset(keys), lambda: theirs.subset(keys)),
    ]
    for ours_fn, theirs_fn in cases:
        a, b = _both(ours_fn, theirs_fn)
        assert _text(a) == _text(b)
    assert cap.ordering_key() == theirs.ordering_key()
    assert (cap < other) == (theirs < their_other)


@pytest.mark.interop
@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcXYZ019_-.", min_size=1, max_size=8))
def test_extension_builders_agree_with_the_reference(ext: str) -> None:
    rm, _ = _ref()
    for name in (
        "file_media_urn_for_ext",
        "text_media_urn_for_ext",
        "image_media_urn_for_ext",
        "audio_media_urn_for_ext",
    ):
        ours = globals()[name](ext)
        assert M(ours) == M(str(rm.MediaUrn.from_string(getattr(rm, name)(ext)))), name


def test_both_kinds_share_one_value_protocol() -> None:
    from cartridge_runtime.urn import CapUrn, MediaUrn, PrefixMismatchError

    media = MediaUrn.parse("media:pdf")
    cap = CapUrn.parse('cap:in="media:pdf";op=x;out="media:txt"')
    assert type(media).__eq__ is type(cap).__eq__  # defined once, in the base
    assert media == MediaUrn.parse("media:pdf") and hash(media) == hash(MediaUrn.parse("media:pdf"))
    assert media != cap and cap != media and str(media) == media.text
    assert repr(cap) == f"CapUrn({cap.text!r})"
    assert sorted([MediaUrn.parse("media:b"), MediaUrn.parse("media:a")])[0].text == "media:a"
    with pytest.raises(PrefixMismatchError, match="cannot compare a media URN with CapUrn"):
        media.conforms_to(cap)  # type: ignore[arg-type]
    with pytest.raises(PrefixMismatchError, match="cannot compare a cap URN with MediaUrn"):
        cap.accepts(media)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _ = media < cap  # type: ignore[operator]
