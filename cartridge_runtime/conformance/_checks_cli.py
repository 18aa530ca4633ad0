"""Checks of CLI mode (chapter 9) that can be judged from outside: help on stderr, usage
errors, and a failing handler's JSON line compared with the ERR the same cap sent in frame
mode. (How emissions end, CLI-12, shows only in CLI mode and is not judged.)"""

from __future__ import annotations

import json
from typing import Any

from ..protocol import ErrorCode
from ._checks_handshake import target_hello
from ._checks_requests import sample
from ._context import CheckContext, meta_of
from ._model import check
from ._outcomes import CheckFailed, CheckSkipped
from ._session import run_cli

__all__ = ()

#: An alias no cartridge declares (CLI-5).
_NO_SUCH_ALIAS = "conformance-no-such-command-7f3a"
#: Frame-mode ERR codes that say nothing about the handler (CLI-6 does not compare them).
_NOT_THE_HANDLER = frozenset(
    {
        ErrorCode.NO_HANDLER,
        ErrorCode.CANCELLED,
        ErrorCode.PROTOCOL_ERROR,
        ErrorCode.PROTOCOL_VIOLATION,
    }
)
#: Handler failures tried in CLI mode, at most.
_MAX_TRIES = 3


def _cli(ctx: CheckContext, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Run the target with ``args``.

    :raises CheckFailed: it did not finish in time.
    """
    rc, out, err = run_cli([*ctx.argv, *args], max(1.0, ctx.remaining()), stdin)
    if rc is None:
        raise CheckFailed(f"`{' '.join(args)}` did not finish in time")
    return rc, out, err


def _help_verdict(what: str, rc: int, out: bytes, err: bytes) -> None:
    """:raises CheckFailed: help did not go to stderr alone, with status 0."""
    if rc != 0:
        raise CheckFailed(f"`{what}` exited {rc} (want 0)")
    if out:
        raise CheckFailed(f"`{what}` wrote {out[:40]!r} on stdout (help goes to stderr)")
    if not err.strip():
        raise CheckFailed(f"`{what}` wrote nothing on stderr")


def _aliases(ctx: CheckContext) -> dict[str, str]:
    """First alias of each manifest cap, by cap URN (from the HELLO manifest)."""
    raw = meta_of(target_hello(ctx)).get("manifest")
    try:
        manifest: Any = json.loads(raw) if isinstance(raw, bytes) else {}
    except ValueError:
        return {}
    out: dict[str, str] = {}
    for group in manifest.get("cap_groups", []) if isinstance(manifest, dict) else []:
        for cap in group.get("caps", []) if isinstance(group, dict) else []:
            aliases = cap.get("aliases") if isinstance(cap, dict) else None
            if isinstance(aliases, list) and aliases and isinstance(aliases[0], str):
                out[str(cap.get("urn"))] = aliases[0]
    return out


@check("CLI-3", "`--help` and `-h`: help on stderr, exit 0", rules=("CLI-3",), ck="CK-45", procs=2)
def cli_help(ctx: CheckContext) -> str:
    for flag in ("--help", "-h"):
        _help_verdict(flag, *_cli(ctx, flag))
    return "help on stderr, nothing on stdout, exit 0"


@check(
    "CLI-4",
    "`<alias> --help`: the cap's help on stderr, exit 0",
    "SHOULD",
    rules=("CLI-4",),
    ck="CK-45",
    procs=2,
)
def cli_alias_help(ctx: CheckContext) -> str:
    aliases = _aliases(ctx)
    if not aliases:
        raise CheckSkipped("no manifest cap has an alias")
    alias = next(iter(aliases.values()))
    _help_verdict(f"{alias} --help", *_cli(ctx, alias, "--help"))
    return f"`{alias} --help` on stderr, exit 0"


@check("CLI-5", "Unknown alias: a diagnostic and a non-zero exit", rules=("CLI-5",), ck="CK-46")
def cli_unknown_alias(ctx: CheckContext) -> str:
    rc, out, err = _cli(ctx, _NO_SUCH_ALIAS)
    if rc == 0:
        raise CheckFailed(f"`{_NO_SUCH_ALIAS}` exited 0")
    if out:
        raise CheckFailed(f"`{_NO_SUCH_ALIAS}` wrote {out[:40]!r} on stdout")
    if not err.strip():
        raise CheckFailed(f"`{_NO_SUCH_ALIAS}` exited {rc} without a word on stderr")
    return f"exit {rc}, a diagnostic on stderr"


@check(
    "CLI-6",
    "A failing handler: one JSON line on stderr, as in frame mode",
    rules=("CLI-6", "ERR-4"),
    ck="CK-47",
    audit=True,
)
def cli_handler_failure(ctx: CheckContext) -> str:
    failures = [f for f in ctx.run.sweep_failures if f[2].code not in _NOT_THE_HANDLER]
    if not failures:
        raise CheckSkipped("no manifest cap failed for the kit's sample inputs in frame mode")
    aliases = _aliases(ctx)
    judged = 0
    for urn, media, frame_err in failures[:_MAX_TRIES]:
        alias = aliases.get(urn)
        if alias is None:
            continue
        rc, out, err = _cli(ctx, alias, stdin=sample(media))
        if rc == 0:
            continue  # CLI mode maps arguments its own way: this input served there
        judged += 1
        lines = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
        reports = [r for r in map(_json_object, lines) if r is not None]
        if len(reports) != 1:
            shown = lines[0][:80] if lines else ""
            raise CheckFailed(
                f"`{alias}` failed (exit {rc}) with {len(reports)} JSON lines on stderr "
                f'(want one: {{"error", "code", "attribution_class"}}); first line {shown!r}'
            )
        report = reports[0]
        missing = [k for k in ("error", "code", "attribution_class") if k not in report]
        if missing:
            raise CheckFailed(f"`{alias}`: the JSON line lacks {missing}")
        got = (report["code"], report["attribution_class"])
        want = (str(frame_err.code), str(frame_err.attribution_class))
        if got != want:
            raise CheckFailed(f"`{alias}`: CLI mode says {got}, frame mode said {want}")
        if out:
            raise CheckFailed(f"`{alias}` failed but wrote {out[:40]!r} on stdout")
    if not judged:
        raise CheckSkipped("the caps that failed in frame mode succeeded in CLI mode")
    return f"{judged} handler failure(s): one JSON line each, code and class as in frame mode"


def _json_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
