"""``cartridge list`` end to end, through a real subprocess: the table, ``--json``, a warm run
that starts nothing, the bundled cartridges, and a usage error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _discovery_helpers import BROKEN, spawn_env, write_cartridge

ROOT = Path(__file__).resolve().parent.parent.parent
BUNDLED = ROOT / "cartridges"


def cartridge_list(*args: str | Path, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cartridge_runtime.cli", "list", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=spawn_env(log) if log is not None else None,
    )


def test_json_lists_found_and_refused_and_a_warm_run_starts_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha", alias="shout")
    (root / "broken.py").write_text(BROKEN)
    log = tmp_path / "spawns.log"
    cache = tmp_path / "cache"
    cold = cartridge_list(root, "--json", "--cache", cache, log=log)
    assert cold.returncode == 0, cold.stderr
    data = json.loads(cold.stdout)
    assert [f["name"] for f in data["found"]] == ["alpha"]
    alpha = data["found"][0]
    assert alpha["layout"] == "script" and alpha["version"] == "1.0.0"
    assert alpha["where"] == str(root / "alpha.py")
    assert [c["aliases"] for c in alpha["caps"]] == [["shout"]]  # identity cap left out
    assert [(r["path"], r["kind"]) for r in data["refused"]] == [
        (str(root / "broken.py"), "handshake_failed")
    ]
    assert (data["spawns"], data["cache_hits"], data["cache_dir"]) == (2, 0, str(cache))
    assert log.read_text().split() == ["alpha"]

    warm = cartridge_list(root, "--json", "--cache", cache, log=log)
    assert warm.returncode == 0, warm.stderr
    again = json.loads(warm.stdout)
    assert (again["spawns"], again["cache_hits"]) == (0, 2)
    assert log.read_text().split() == ["alpha"]  # nothing started the second time
    assert again["found"][0]["from_cache"] is True


def test_the_table_shows_the_bundled_cartridges_by_alias(tmp_path: Path) -> None:
    done = cartridge_list(BUNDLED, "--cache", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    for word in ("archive", "jsonkit", "text", "wordkit", "interop", "query", "outline"):
        assert word in done.stdout
    assert "5 found, 0 not hosted" in done.stdout
    assert "identity" not in done.stdout


def test_a_missing_root_is_a_usage_error_on_one_line(tmp_path: Path) -> None:
    done = cartridge_list(tmp_path / "absent")
    assert done.returncode == 2
    assert done.stderr == f"error: no such folder: {tmp_path / 'absent'}\n"
    assert done.stdout == ""


def test_without_a_root_the_per_user_folder_is_listed(tmp_path: Path) -> None:
    env = {**spawn_env(tmp_path / "log"), "XDG_DATA_HOME": str(tmp_path / "data")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.pop("CARTRIDGE_HOME", None)
    base = [sys.executable, "-m", "cartridge_runtime.cli", "list", "--json"]
    done = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    empty = json.loads(done.stdout)
    assert empty["found"] == [] and empty["root"].startswith(str(tmp_path / "data"))
    assert not (tmp_path / "data").exists()  # listing creates nothing
    write_cartridge(tmp_path / "data" / "cartridge-runtime" / "cartridges" / "a.py", "alpha")
    done = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)
    assert [f["name"] for f in json.loads(done.stdout)["found"]] == ["alpha"]
    assert (tmp_path / "cache" / "cartridge" / "manifests").is_dir()  # the per-user home
