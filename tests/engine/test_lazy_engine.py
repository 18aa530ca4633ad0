"""The engine package resolves its public names on first use, and an engine that makes plain
calls imports none of the machine runs, graphs, relay, planner and discovery: every name of
``__all__`` is there, the table of homes agrees with the names type checkers see, and a call
made in a fresh interpreter leaves those packages out of ``sys.modules``."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cartridge_runtime.engine as engine

INTEROP = Path(__file__).resolve().parents[2] / "cartridges" / "interop.py"

#: What a plain call needs none of.
HEAVY = (
    "cartridge_runtime.machine",
    "cartridge_runtime.planner",
    "cartridge_runtime.discovery",
    "cartridge_runtime.graph",
    "cartridge_runtime.relay",
    "cartridge_runtime.engine._machines._api",
    "cartridge_runtime.engine._graphs._session",
    "cartridge_runtime.engine._relay._switch",
)


def _loaded_after(body: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``body``."""
    probe = textwrap.dedent(body) + textwrap.dedent(
        """
        import sys
        sys.stdout.write("\\n".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(done.stdout.splitlines())


@pytest.mark.parametrize("name", engine.__all__)
def test_every_public_name_resolves_to_its_home(name: str) -> None:
    value = getattr(engine, name)
    home, attribute = engine._EXPORTS[name]
    assert value is getattr(sys.modules[f"cartridge_runtime.engine.{home}"], attribute)


def test_a_renamed_name_is_its_home_under_the_name_there() -> None:
    from cartridge_runtime.engine._machines._records import default_cache_dir

    assert engine.default_step_cache_dir is default_cache_dir


def test_the_table_is_the_public_names_and_what_type_checkers_import() -> None:
    assert len(engine.__all__) == len(set(engine.__all__))
    # OtelExporter resolves too but stays out of __all__ (it needs the extra ``otel``).
    assert set(engine._EXPORTS) == {*engine.__all__, "OtelExporter"}
    source = Path(engine.__file__).read_text(encoding="utf-8")
    checked = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    }
    assert checked == engine._EXPORTS


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = engine.no_such_name  # type: ignore[attr-defined]
    assert not hasattr(engine, "_no_such_private")


def test_dir_lists_the_public_names() -> None:
    assert set(engine.__all__) <= set(dir(engine))


def test_a_resolved_name_is_kept_on_the_package() -> None:
    loaded = _loaded_after(
        """
        import cartridge_runtime.engine as e
        first = e.Retry
        assert "Retry" in vars(e) and e.Retry is first
        """
    )
    assert "cartridge_runtime.engine._supervision._retry" in loaded


@pytest.mark.parametrize(
    "statement",
    [
        "from cartridge_runtime.engine import CallError, Engine, EngineConfig",
        "import cartridge_runtime; cartridge_runtime.Engine(); cartridge_runtime.CallError",
    ],
)
def test_importing_the_engine_leaves_the_heavy_packages_alone(statement: str) -> None:
    loaded = _loaded_after(statement)
    assert "cartridge_runtime.engine._engine" in loaded
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


def test_a_call_leaves_the_heavy_packages_alone() -> None:
    loaded = _loaded_after(
        f"""
        import anyio
        from cartridge_runtime.engine import Engine

        async def main():
            async with Engine() as eng:
                eng.add_cartridge({str(INTEROP)!r})
                result = await eng.call("cap:echo", [("media:", b"hi")])
                assert result.data == b"hi", result
                async with eng.call("cap:echo", [("media:", b"yo")]) as r:
                    assert (await r.collect()).data == b"yo"

        anyio.run(main)
        """
    )
    assert "cartridge_runtime.engine._opening" in loaded  # a call was made
    for heavy in HEAVY:
        assert heavy not in loaded, heavy


def test_the_heavy_packages_come_when_a_method_needs_them() -> None:
    loaded = _loaded_after(
        """
        import anyio
        from cartridge_runtime.engine import Engine

        async def main():
            async with Engine() as eng:
                assert eng.hosts() == ()
                assert await eng.plan("media:txt", "media:pdf") == []

        anyio.run(main)
        """
    )
    for needed in ("cartridge_runtime.planner", "cartridge_runtime.engine._relay._switch"):
        assert needed in loaded, needed


@pytest.mark.asyncio
async def test_the_hosts_switch_built_before_the_start_or_after_the_stop_runs_or_waits() -> None:
    from cartridge_runtime.engine import Engine

    early = Engine()
    early.set_host_state("h", b"state")  # built before the engine runs: started with it
    async with early:
        assert early._hosts.built is not None
        assert early.hosts() == () and early.status() == []
    late = Engine()
    async with late:
        assert late._hosts.built is None  # nothing asked for it
    late.set_host_state("h", b"state")  # built after the stop: never run in a closed group
    assert late._hosts.built is not None
    assert late.hosts() == ()
