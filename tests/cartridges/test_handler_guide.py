"""Every ``# test: run`` snippet of ``docs/handler-guide.md`` runs and its assertions hold.

The guide's runnable examples are fenced ```python blocks whose first line is ``# test: run``.
Each is executed as its own script in a subprocess, from the repo root (also on ``sys.path`` through
``PYTHONPATH``), so a snippet that stops matching the API fails here instead of misleading a
reader.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "handler-guide.md"
MARKER = "# test: run"
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def _snippets() -> list[tuple[str, str]]:
    """``(id, code)`` for each tested block, the id naming the nearest heading above it."""
    text = GUIDE.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        code = match.group(1)
        if code.lstrip().splitlines()[:1] != [MARKER]:
            continue
        line = text.count("\n", 0, match.start()) + 1
        headings = re.findall(r"^#{2,3} (.+)$", text[: match.start()], re.MULTILINE)
        slug = re.sub(r"[^a-z0-9]+", "-", (headings[-1] if headings else "top").lower()).strip("-")
        found.append((f"L{line}-{slug}", code))
    return found


SNIPPETS = _snippets()


def test_guide_has_tested_snippets() -> None:
    """The guide exists and most of its examples are tested (guards against a lost marker)."""
    assert len(SNIPPETS) >= 15


@pytest.mark.parametrize("code", [c for _, c in SNIPPETS], ids=[i for i, _ in SNIPPETS])
def test_snippet_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,  # snippets name repo files the way a reader in a checkout would
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"snippet failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"


def test_sync_handler_operror_keeps_its_code() -> None:
    """The guide's error contract holds for synchronous handlers too (code, class, arg_urn)."""
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, OpError
    from cartridge_runtime.testing import call_sync

    cap = 'cap:in=media:void;op=sync-fail;out="media:enc=utf-8"'
    runtime = CartridgeRuntime(
        Manifest.build(
            name="sync-fail",
            version="1.0.0",
            description="fails",
            caps=[CapDef.simple(cap, "Fail", aliases="sync-fail")],
        )
    )

    @runtime.op(cap)
    def fail(req: object) -> None:
        raise OpError("SYNC_BAD", "refused", "input", arg_urn="media:enc=utf-8")

    error = call_sync(runtime, cap).error
    assert error is not None
    assert (error.code, error.attribution_class, error.arg_urn) == (
        "SYNC_BAD",
        "input",
        "media:enc=utf-8",
    )
