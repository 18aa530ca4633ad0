"""Discovery over a temporary tree holding both layouts: scripts and executables in the root,
installed version folders (plain and managed), and every reason a cartridge is refused
(DSC-1 to DSC-8, DSC-12)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from _discovery_helpers import BROKEN, SpawnLog, write_cartridge, write_version

from cartridge_runtime.discovery import (
    Discovery,
    DiscoveryError,
    LayoutKind,
    RefusalKind,
    RootNotFound,
)
from cartridge_runtime.discovery._install import (
    InstallRecordError,
    entry_escapes,
    parse_install_record,
    version_key,
)
from cartridge_runtime.engine import Engine, discover
from cartridge_runtime.protocol import CartridgeRuntimeError


def _tree(root: Path) -> None:
    write_cartridge(root / "alpha.py", "alpha", alias="shout", executable=False)
    (root / "helper.py").write_text("def helper() -> int:\n    return 1\n")
    (root / "notes.md").write_text("# not a cartridge\n")
    (root / ".DS_Store").write_bytes(b"\0\0")
    (root / "broken.py").write_text(BROKEN)
    tool = write_cartridge(root / "tool", "tool", alias="whisper")
    tool.write_text(f"#!{sys.executable}\n" + tool.read_text().split("\n", 1)[1])
    # plain installed tree: {name}/{version}/cartridge.json
    installed = root / "installed"
    for version in ("1.0.0", "1.9.0", "1.10.0"):
        write_version(installed / "beta" / version, "beta", version, alias="beta-op")
    gamma = installed / "gamma" / "2.0.0"
    gamma.mkdir(parents=True)
    (gamma / "cartridge.json").write_text("{not json")
    write_version(installed / "delta" / "1.0.0", "delta", "1.0.0", record={"entry": "gone.py"})
    write_version(installed / "eta" / "1.0.0", "eta", "1.0.0", record={"entry": "../../x.py"})
    write_version(
        installed / "theta" / "1.0.0", "theta", "1.0.0", record={"installed_from": "bundle"}
    )
    (installed / "iota" / "3.0.0").mkdir(parents=True)  # not a version folder: no record
    # managed tree: {slug}/v{N}/{channel}/{name}/{version}
    write_version(root / "dev" / "v1" / "release" / "eps" / "0.1.0", "eps", "0.1.0", alias="eps-op")
    write_version(root / "dev" / "v1" / "release" / "kappa" / "0.1.0", "kappa", "0.1.0",
                  record={"registry_url": "https://reg.example"})  # fmt: skip
    write_version(root / "dev" / "v1" / "nightly" / "zeta" / "0.2.0", "zeta", "0.2.0")
    (root / "dev" / "v1" / "release" / "lambda").mkdir(parents=True)
    reg = root / "reg.example"
    reg.mkdir()
    charter = {"anchor": "https://reg.example", "slug": "reg.example", "kind": "cartridges"}
    (reg / "charter.json").write_text(json.dumps(charter))
    url = {"registry_url": "https://reg.example"}
    write_version(reg / "v1" / "release" / "mu" / "1.0.0", "mu", "1.0.0", alias="mu-op", record=url)
    write_version(reg / "v1" / "release" / "nu" / "1.0.0", "nu", "1.0.0",
                  record={"registry_url": "https://other.example"})  # fmt: skip
    write_version(root / "nocharter" / "v1" / "release" / "xi" / "1.0.0", "xi", "1.0.0", record=url)


@pytest.mark.asyncio
async def test_both_layouts_are_found_and_every_refusal_has_its_reason(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    found = await discover(root, cache=cache_dir)
    _check_found(found, spawn_log)
    _check_refused(found)


def _check_found(found: Discovery, spawn_log: SpawnLog) -> None:
    by_name = {f.name: f for f in found.found}
    assert sorted(by_name) == ["alpha", "beta", "eps", "mu", "tool"]
    assert by_name["alpha"].layout is LayoutKind.SCRIPT
    assert by_name["alpha"].command == (sys.executable, str(found.root / "alpha.py"))
    assert by_name["tool"].layout is LayoutKind.EXECUTABLE
    assert by_name["tool"].command == (str(found.root / "tool"),)
    beta = by_name["beta"]
    assert beta.layout is LayoutKind.INSTALLED and beta.version == "1.10.0"
    assert beta.where == found.root / "installed" / "beta" / "1.10.0"
    assert beta.install is not None and beta.install.channel == "release"
    assert beta.aliases == ("beta-op",)
    assert by_name["mu"].install is not None
    assert by_name["mu"].install.registry_url == "https://reg.example"
    assert [f.name for f in found.found] == sorted(
        (f.name for f in found.found), key=lambda n: str(by_name[n].where)
    )
    assert all(not f.from_cache for f in found.found)
    assert sorted(spawn_log.names()) == ["alpha", "beta", "eps", "mu", "tool"]
    assert found.spawns == 6 and found.cache_hits == 0  # the five, and broken.py


def _check_refused(found: Discovery) -> None:
    got = {(r.path.relative_to(found.root).as_posix(), r.kind) for r in found.refused}
    assert got == {
        ("broken.py", RefusalKind.HANDSHAKE_FAILED),
        ("installed/beta/1.0.0", RefusalKind.SUPERSEDED),
        ("installed/beta/1.9.0", RefusalKind.SUPERSEDED),
        ("installed/gamma/2.0.0", RefusalKind.MANIFEST_INVALID),
        ("installed/delta/1.0.0", RefusalKind.ENTRY_MISSING),
        ("installed/eta/1.0.0", RefusalKind.ENTRY_ESCAPES),
        ("installed/theta/1.0.0", RefusalKind.BUNDLE_UNPROVEN),
        ("dev/v1/release/kappa/0.1.0", RefusalKind.MISPLACED),
        ("dev/v1/nightly/zeta/0.2.0", RefusalKind.MISPLACED),
        ("dev/v1/release/lambda", RefusalKind.NO_VERSION),
        ("reg.example/v1/release/nu/1.0.0", RefusalKind.MISPLACED),
        ("nocharter/v1/release/xi/1.0.0", RefusalKind.MISPLACED),
    }
    by_path = {r.path.relative_to(found.root).as_posix(): r for r in found.refused}
    assert "SPAWN_FAILED" in by_path["broken.py"].reason
    assert "broken on purpose" in by_path["broken.py"].reason  # its stderr's last line
    assert "not valid JSON" in by_path["installed/gamma/2.0.0"].reason
    assert "1.10.0 is newer" in by_path["installed/beta/1.9.0"].reason
    assert "'nightly'" in by_path["dev/v1/nightly/zeta/0.2.0"].reason
    assert "no charter.json" in by_path["nocharter/v1/release/xi/1.0.0"].reason
    assert by_path["installed/gamma/2.0.0"].name == "gamma"
    assert all("\n" not in r.reason for r in found.refused)


@pytest.mark.asyncio
async def test_a_root_that_is_one_version_folder(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    version = write_version(tmp_path / "omega" / "4.2.0", "omega", "4.2.0")
    result = await discover(version, cache=cache_dir)
    assert [(f.name, f.layout) for f in result.found] == [("omega", LayoutKind.INSTALLED)]


@pytest.mark.asyncio
async def test_a_missing_root_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(RootNotFound, match="no such folder") as caught:
        await discover(tmp_path / "absent")
    assert isinstance(caught.value, DiscoveryError)
    assert isinstance(caught.value, CartridgeRuntimeError)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RootNotFound, match="not a folder"):
        await discover(tmp_path / "file")


@pytest.mark.asyncio
async def test_an_empty_root_finds_nothing(tmp_path: Path, cache_dir: Path) -> None:
    result = await discover(tmp_path, cache=cache_dir)
    assert (result.found, result.refused, result.spawns) == ((), (), 0)


@pytest.mark.asyncio
async def test_a_found_cartridge_is_added_to_an_engine_and_serves(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    write_cartridge(tmp_path / "alpha.py", "alpha", alias="shout")
    result = await discover(tmp_path, cache=cache_dir)
    cap = 'cap:in="media:enc=utf-8";op=shout;out="media:enc=utf-8"'
    async with Engine() as engine:
        name = result.found[0].add_to(engine)
        assert name == "alpha"
        assert engine.route(cap) == "alpha"  # known before it ever started
        answer = await engine.call_bytes(cap, [("media:enc=utf-8", b"hi")])
    assert answer.data == b"hi"


def test_install_record_rules() -> None:
    good: dict[str, object] = {
        "name": "n",
        "version": "1",
        "channel": "nightly",
        "registry_url": None,
        "entry": "bin/n",
        "installed_at": "2026-01-01T00:00:00Z",
        "extra": [1, 2],
    }
    record = parse_install_record(json.dumps(good).encode())
    assert (record.channel, record.registry_url, record.entry) == ("nightly", None, "bin/n")
    for key, value, words in [
        ("registry_url", ..., "missing required field 'registry_url'"),
        ("channel", "beta", "channel must be 'release' or 'nightly'"),
        ("entry", "", "field 'entry' must be non-empty text"),
        ("fabric_manifest_version", -1, "fabric_manifest_version"),
    ]:
        bad = dict(good)
        if value is ...:
            del bad[key]
        else:
            bad[key] = value
        with pytest.raises(InstallRecordError, match=words):
            parse_install_record(json.dumps(bad).encode())
    with pytest.raises(InstallRecordError, match="not a JSON object"):
        parse_install_record(b"[1]")
    assert [entry_escapes(e) for e in ("a/../b", "../a", "/abs", "C:\\x", "a/./b/../..")] == [
        False,
        True,
        True,
        True,
        False,
    ]
    names = ["0.9", "0.10", "0.9.1", "1.0.0-rc1", "1.0.0"]
    assert sorted(names, key=version_key) == ["0.9", "0.9.1", "0.10", "1.0.0", "1.0.0-rc1"]


@pytest.mark.asyncio
async def test_a_js_script_runs_with_node(tmp_path: Path, cache_dir: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    (tmp_path / "tool.js").write_text(
        "process.stderr.write('no HELLO here\\n'); process.exit(2);\n"
    )
    result = await discover(tmp_path, cache=cache_dir)
    (refused,) = result.refused
    assert (refused.path, refused.kind) == (tmp_path / "tool.js", RefusalKind.HANDSHAKE_FAILED)
    assert "no HELLO here" in refused.reason and result.spawns == 1


@pytest.mark.asyncio
async def test_engine_discover_hosts_what_it_finds_and_plans_without_a_start(
    tmp_path: Path, cache_dir: Path
) -> None:
    write_cartridge(tmp_path / "alpha.py", "alpha", alias="shout")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "cartridge.json").write_text("{not json")
    await discover(tmp_path, cache=cache_dir)  # warms the cache
    cap = 'cap:in="media:enc=utf-8";op=shout;out="media:enc=utf-8"'
    async with Engine() as engine:
        found = await engine.discover(tmp_path, cache=cache_dir)
        assert [f.name for f in found.found] == ["alpha"] and found.spawns == 0
        assert [r.path.name for r in found.refused] == ["broken"]
        plans = await engine.plan("media:enc=utf-8", "media:enc=utf-8", limit=5)
        assert {str(step.cap) for p in plans for step in p.cap_steps} == {cap}
        assert {s.name: s.starts for s in engine.status()} == {"alpha": 0}
        answer = await engine.call_bytes(cap, [("media:enc=utf-8", b"hi")])
    assert answer.data == b"hi"
