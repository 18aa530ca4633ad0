"""The bundled ``jsonkit`` cartridge: the path language, the query cap with its statistics
output, errors attributed to their argument, the engine and the command-line mode."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _bundled import CARTRIDGES, assert_conformant, load_cartridge, run_cli, sample

from cartridge_runtime.manifest import validate_manifest
from cartridge_runtime.testing import CallResult, CartridgeHarness
from cartridge_runtime.urn import CapUrn

jsonkit = load_cartridge("jsonkit")
DOC: Any = json.loads(sample("sample.json"))


def test_manifest_is_valid_and_urns_are_canonical() -> None:
    validate_manifest(jsonkit.MANIFEST)
    for cap in jsonkit.MANIFEST.all_caps():
        assert str(CapUrn.parse(cap.urn)) == cap.urn
    assert str(CapUrn.parse(jsonkit.CAP_QUERY)) == jsonkit.CAP_QUERY
    cap = jsonkit.MANIFEST.find_cap("query")
    assert cap is not None and [o.media_urn for o in cap.outputs] == [
        jsonkit.MATCH_LIST,
        jsonkit.QUERY_STATS,
    ]


# -- the path language ----------------------------------------------------------------------------


def _values(path: str, document: Any = DOC) -> list[Any]:
    matches, _ = jsonkit.query(document, path)
    return [value for _, value in matches]


def _paths(path: str, document: Any = DOC) -> list[str]:
    matches, _ = jsonkit.query(document, path)
    return [location for location, _ in matches]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", [DOC]),
        ("$.store.name", ["Corner Books"]),
        ("store.name", ["Corner Books"]),
        ("$.store.book[0].title", ["Sayings of the Century"]),
        ("$.store.book[-1].author", ["J. R. R. Tolkien"]),
        ("$.store.book[9]", []),
        ("$.store.name[0]", []),
        ("$.nothing.here", []),
        ("$..price", [8.95, 12.99, 8.99, 22.99, 19.95]),
        ("..isbn", ["0-553-21311-3", "0-395-19395-8"]),
        ("$.store.book[*].tags[*]", ["quotes", "war", "fiction"]),
        ("$.store.bicycle.*", ["red", 19.95, True]),
        ("$.store.bicycle['in stock']", [True]),
        ('$.store.bicycle["in stock"]', [True]),
        ("$.store.book[?price < 10].title", ["Sayings of the Century", "Moby Dick"]),
        ("$.store.book[?price>=22.99].title", ["The Lord of the Rings"]),
        ("$.store.book[?author=='Evelyn Waugh'].price", [12.99]),
        ('$.store.book[?@.author!="Nigel Rees"].price', [12.99, 8.99, 22.99]),
        ("$.store.book[?isbn].title", ["Moby Dick", "The Lord of the Rings"]),
        ("$..[?color=='red'].price", [19.95]),
        ("$.store.book[?title>'T'].title", ["The Lord of the Rings"]),
        ("$.store.book[?price<'x']", []),
    ],
)
def test_paths(path: str, expected: list[Any]) -> None:
    assert _values(path) == expected


def test_equality_keeps_json_types_apart() -> None:
    document = [{"v": True}, {"v": 1}, {"v": 1.0}, {"v": None}, {"v": "1"}]
    assert _values("$[?v==1]", document) == [{"v": 1}, {"v": 1.0}]
    assert _values("$[?v==true]", document) == [{"v": True}]
    assert _values("$[?v==null]", document) == [{"v": None}]


def test_match_locations_are_normalized() -> None:
    assert _paths("$..tags[0]") == ["$.store.book[0].tags[0]", "$.store.book[1].tags[0]"]
    assert _paths("$.store.bicycle['in stock']") == ['$.store.bicycle["in stock"]']
    assert _paths("$.store.book[-1]") == ["$.store.book[3]"]


def test_recursive_wildcard_and_visited_count() -> None:
    matches, visited = jsonkit.query({"a": [1, {"b": 2}]}, "$..*")
    assert [value for _, value in matches] == [[1, {"b": 2}], 1, {"b": 2}, 2]
    assert visited == 4
    _, visited = jsonkit.query({"a": {"b": 1}}, "$.a.b")
    assert visited == 2


def test_deep_documents_do_not_hit_the_recursion_limit() -> None:
    document: Any = 0
    for _ in range(800):
        document = {"k": document}
    matches, _ = jsonkit.query(document, "$..k")
    assert len(matches) == 800


@pytest.mark.parametrize(
    "path",
    [
        "",
        "   ",
        "$.",
        "$[",
        "$[1",
        "$[abc]",
        "$..",
        "$.a b",
        "$[?]",
        "$[?a==]",
        "$['open",
        "a[?b==@]",
        "$x",
    ],
)
def test_bad_paths_are_refused_with_an_offset(path: str) -> None:
    with pytest.raises(jsonkit.PathSyntaxError) as info:
        jsonkit.parse_path(path)
    assert "offset" in str(info.value)


def test_normal_form_round_trips() -> None:
    for path in ('$.a[0]..b[*][?c=="d"]', "$..*", "$['x y'].z", "$[?p.q>=2]"):
        text = jsonkit.path_text(jsonkit.parse_path(path))
        assert jsonkit.path_text(jsonkit.parse_path(text)) == text


# -- in-process (the harness) ---------------------------------------------------------------------


async def _query(document: bytes, path: bytes, doc_urn: str | None = None) -> CallResult:
    inputs = [(doc_urn or jsonkit.JSON_DOC, document), (jsonkit.JSON_PATH, path)]
    async with CartridgeHarness(jsonkit.build_runtime()) as harness:
        return await harness.call(jsonkit.CAP_QUERY, inputs)


@pytest.mark.asyncio
async def test_query_items_meta_and_stats_output() -> None:
    result = (await _query(sample("sample.json"), b"$.store.book[?price<10]")).raise_for_error()
    main = result.main
    assert main is not None and main.is_sequence and main.media_urn == jsonkit.MATCH_LIST
    assert [json.loads(value)["title"] for value, _ in main.items] == [
        "Sayings of the Century",
        "Moby Dick",
    ]
    assert [meta for _, meta in main.items] == [
        {"path": "$.store.book[0]"},
        {"path": "$.store.book[2]"},
    ]
    stats_stream = result.output(jsonkit.QUERY_STATS)
    assert stats_stream is not None
    stats = json.loads(stats_stream.data)
    assert stats["matches"] == 2
    assert stats["path"] == "$.store.book[?price<10]"
    assert stats["visited"] >= 4


@pytest.mark.asyncio
async def test_query_without_matches_still_reports_stats() -> None:
    result = (await _query(b"[]", b"$[0]")).raise_for_error()
    assert result.main is not None and result.main.items == []
    stats_stream = result.output(jsonkit.QUERY_STATS)
    assert stats_stream is not None
    assert json.loads(stats_stream.data)["matches"] == 0


@pytest.mark.asyncio
async def test_document_under_another_media_urn_is_found_by_fallback() -> None:
    result = (await _query(b'{"a": 1}', b"$.a", doc_urn="media:fmt=json;record")).raise_for_error()
    assert result.main is not None and [v for v, _ in result.main.items] == [b"1"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("document", "path", "code", "arg"),
    [
        (b"{not json", b"$.a", "INVALID_JSON", "JSON_DOC"),
        (b"\xff\xfe", b"$.a", "INVALID_JSON", "JSON_DOC"),
        (b"[NaN]", b"$[0]", "INVALID_JSON", "JSON_DOC"),
        (b"[" * 5000 + b"]" * 5000, b"$", "INVALID_JSON", "JSON_DOC"),
        (b"{}", b"$.a[", "INVALID_PATH", "JSON_PATH"),
        (b"{}", b"\xff", "INVALID_PATH", "JSON_PATH"),
        (b"{}", b"", "INVALID_PATH", "JSON_PATH"),
    ],
)
async def test_validation_errors_name_their_argument(
    document: bytes, path: bytes, code: str, arg: str
) -> None:
    result = await _query(document, path)
    assert result.error is not None
    assert result.error.code == code
    assert result.error.attribution_class == "input"
    assert result.error.arg_urn == getattr(jsonkit, arg)


@pytest.mark.asyncio
async def test_missing_path_is_an_input_error() -> None:
    async with CartridgeHarness(jsonkit.build_runtime()) as harness:
        result = await harness.call(jsonkit.CAP_QUERY, [(jsonkit.JSON_DOC, b"{}")])
    assert result.error is not None
    assert result.error.attribution_class == "input"
    assert result.error.arg_urn == jsonkit.JSON_PATH


# -- through the engine (subprocess) --------------------------------------------------------------


@pytest.mark.asyncio
async def test_engine_query_with_two_outputs_and_an_error() -> None:
    from cartridge_runtime.engine import CallError, Engine

    async with Engine() as engine:
        engine.add_cartridge(str(jsonkit.__file__))
        result = await engine.call_bytes(
            jsonkit.CAP_QUERY,
            [(jsonkit.JSON_DOC, sample("sample.json")), (jsonkit.JSON_PATH, b"$..price")],
        )
        assert result.items == [b"8.95", b"12.99", b"8.99", b"22.99", b"19.95"]
        stats = result.output(jsonkit.QUERY_STATS)
        assert stats is not None and json.loads(stats.data)["matches"] == 5
        with pytest.raises(CallError) as info:
            await engine.call_bytes(
                jsonkit.CAP_QUERY, [(jsonkit.JSON_DOC, b"{}"), (jsonkit.JSON_PATH, b"$[")]
            )
        assert info.value.code == "INVALID_PATH"
        assert info.value.attribution_class == "input"
        assert info.value.arg_urn == jsonkit.JSON_PATH


# -- command-line mode ----------------------------------------------------------------------------


def test_cli_manifest_and_query() -> None:
    done = run_cli("jsonkit", "manifest")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == jsonkit.MANIFEST.to_json()
    done = run_cli("jsonkit", "query", "$.store.book[?price<10].title", stdin=sample("sample.json"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ['"Sayings of the Century"', '"Moby Dick"']


def test_cli_bad_json_fails_with_exit_1() -> None:
    done = run_cli("jsonkit", "query", "$.a", stdin=b"{oops")
    assert done.returncode == 1
    assert b"INVALID_JSON" in done.stderr


# -- conformance kit ------------------------------------------------------------------------------


@pytest.mark.slow
def test_passes_the_conformance_kit() -> None:
    assert_conformant(CARTRIDGES / "jsonkit.py")
