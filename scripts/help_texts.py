#!/usr/bin/env python3
"""Render every ``cartridge`` command's help and write ``cartridge_runtime/cli/_help_texts.py``.

    .venv/bin/python scripts/help_texts.py          # rewrite the stored texts
    .venv/bin/python scripts/help_texts.py --check  # exit 1 when they are out of date

Run it after changing a command's options or help; ``tests/cli/test_cli_startup.py`` fails
until the stored texts match the application.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartridge_runtime.cli._app import render_help_texts, value_options  # noqa: E402
from cartridge_runtime.cli._quick import sources_digest  # noqa: E402

TARGET = ROOT / "cartridge_runtime" / "cli" / "_help_texts.py"

HEAD = '''"""The help of every ``cartridge`` command, as the typer application renders it.

Written by ``scripts/help_texts.py`` (do not edit by hand); read by :mod:`._quick` so that help
needs no typer import. A test renders the texts again and compares.
"""

from __future__ import annotations

from typing import Final

__all__ = ("HELP", "SOURCES", "VALUE_OPTIONS")

'''


def source() -> str:
    """The module's text."""
    parts = [HEAD, "#: The digest of the sources these texts were rendered from.\n"]
    parts.append(f"SOURCES: Final = {json.dumps(sources_digest())}\n\n")
    parts.append('#: Help text by command path ("" is the root).\n')
    parts.append("HELP: Final[dict[str, str]] = {\n")
    for path, text in render_help_texts().items():
        if '"""' in text or "\\" in text:
            raise SystemExit(f"help of {path!r} holds a triple quote or a backslash")
        parts.append(f'    {json.dumps(path)}: """\\\n{text}""",\n')
    parts.append("}\n\n#: By command path: the options that take a value.\n")
    parts.append("VALUE_OPTIONS: Final[dict[str, frozenset[str]]] = {\n")
    for path, names in value_options().items():
        listed = "".join(f"{' ' * 12}{json.dumps(n)},\n" for n in sorted(names))
        if listed:
            parts.append(
                f"    {json.dumps(path)}: frozenset(\n        {{\n{listed}        }}\n    ),\n"
            )
        else:
            parts.append(f"    {json.dumps(path)}: frozenset(),\n")
    parts.append("}\n")
    return "".join(parts)


def main() -> int:
    text = source()
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run scripts/help_texts.py")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
