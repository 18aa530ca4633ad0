"""Parsing of ``--arg MEDIA_URN=VALUE`` (media URNs contain ``=`` themselves)."""

from __future__ import annotations

import pytest

from cartridge_runtime.cli.call import _split_arg


@pytest.mark.parametrize(
    ("text", "declared", "expected"),
    [
        ("media:=hello", [], ("media:", "hello")),
        ("media:enc=utf-8=a=b", [], ("media:enc=utf-8", "a=b")),
        ("media:textable=hi", [], ("media:textable", "hi")),
        ("media:enc=utf-8;suffix=-x", [], ("media:enc=utf-8;suffix", "-x")),
        ('media:fmt=json;record={"a": 1}', [], ("media:fmt=json;record", '{"a": 1}')),
        ("media:enc=utf-8=@/tmp/f", [], ("media:enc=utf-8", "@/tmp/f")),
        ("media:enc=utf-8=x;y", ["media:enc=utf-8"], ("media:enc=utf-8", "x;y")),
    ],
)
def test_split_arg(text: str, declared: list[str], expected: tuple[str, str]) -> None:
    assert _split_arg(text, declared) == expected


@pytest.mark.parametrize("text", ["nourn=1", "media:enc", "media:a;b"])
def test_split_arg_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        _split_arg(text, [])
