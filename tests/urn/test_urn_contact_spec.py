"""``CapUrn.with_in_spec`` / ``with_out_spec`` refuse ``*`` as the reference does (the cap
text's wildcard is not a media URN to build with); ``media:`` and ``""`` still mean any."""

from __future__ import annotations

import pytest
from capdag.urn.cap_urn import CapUrn as RefCapUrn

from cartridge_runtime.urn import CapUrn, CapUrnError

CAP = "cap:in=media:;op=x;out=media:"


@pytest.mark.parametrize("which", ["in", "out"])
def test_a_star_spec_is_refused_like_the_reference(which: str) -> None:
    ref = RefCapUrn.from_string(CAP)
    with pytest.raises(Exception):  # noqa: B017 - the reference's own error type
        getattr(ref, f"with_{which}_spec")("*")
    with pytest.raises(CapUrnError) as caught:
        getattr(CapUrn.parse(CAP), f"with_{which}_spec")("*")
    assert caught.value.reason == f"invalid_{which}_spec"
    assert "'media:'" in str(caught.value)


@pytest.mark.parametrize("spec", ["media:", ""])
def test_media_top_and_empty_still_mean_any(spec: str) -> None:
    ours = CapUrn.parse(CAP).with_in_spec(spec)
    ref = RefCapUrn.from_string(CAP).with_in_spec(spec)
    assert str(ours) == ref.to_string()


def test_parsing_in_star_still_reads_as_media_top() -> None:
    assert str(CapUrn.parse("cap:in=*;op=x;out=media:")) == str(CapUrn.parse(CAP))
