"""``cartridge call TARGET CAP [--arg MEDIA_URN=VALUE | MEDIA_URN=@PATH]... [-o FILE]``.

Starts TARGET (and any ``--cartridge``) in an :class:`~cartridge_runtime.engine.Engine`, calls
CAP (a cap URN, or an alias from TARGET's manifest) and streams the main output raw to stdout
(or FILE); sequence items go one per line. Piped stdin feeds the main input. Progress and logs
go to stderr: a progress bar on a terminal, plain lines otherwise. Exit status: 0 success, 1 a
call error (one line ``CODE (class): message`` on stderr), 2 a usage error.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import anyio
import typer

from . import app

_USAGE = 2
_CALL_FAILED = 1


def _split_arg(text: str, declared: list[str]) -> tuple[str, str]:
    """``MEDIA_URN=VALUE`` -> (urn, value). Media URNs contain ``=`` themselves, so a declared
    argument URN that prefixes the text wins; otherwise the separator is the ``=`` after the last
    complete ``key=value`` tag (a tag is followed by ``;``).

    :raises ValueError: no separator can be found.
    """
    for urn in sorted(declared, key=len, reverse=True):
        if text.startswith(urn + "="):
            return urn, text[len(urn) + 1 :]
    if not text.startswith("media:"):
        raise ValueError(f"--arg {text!r}: expected MEDIA_URN=VALUE with a media: URN")
    pos = len("media:")
    while True:
        semi = text.find(";", pos)
        end = semi if semi >= 0 else len(text)
        segment = text[pos:end]
        eqs = [i for i, ch in enumerate(segment) if ch == "="]
        if len(eqs) >= 2:
            cut = pos + eqs[1]
            return text[:cut], text[cut + 1 :]
        if semi < 0:
            if len(eqs) == 1:
                cut = pos + eqs[0]
                return text[:cut], text[cut + 1 :]
            raise ValueError(f"--arg {text!r}: expected MEDIA_URN=VALUE")
        pos = semi + 1


async def _stdin_chunks(first: bytes) -> AsyncIterator[bytes]:
    yield first
    while True:
        block = await anyio.to_thread.run_sync(os.read, 0, 1 << 18)
        if not block:
            return
        yield block


def _emit_item(out: IO[bytes], value: Any) -> None:
    if isinstance(value, bytes):
        out.write(value + b"\n")
    elif isinstance(value, str):
        out.write(value.encode("utf-8") + b"\n")
    else:
        out.write(json.dumps(value, default=repr).encode("utf-8") + b"\n")


async def _run_call(
    target: str,
    cap: str,
    args: list[str],
    output: Path | None,
    extra: list[str],
) -> int:
    from ..engine import CallError, CartridgeNotFound, Engine, Log, OutputData, OutputItem, Progress
    from ..manifest import StdinSource

    err = sys.stderr
    tty = err.isatty()
    async with Engine() as engine:
        try:
            name = engine.add_cartridge(target)
            for more in extra:
                engine.add_cartridge(more)
        except CartridgeNotFound as exc:
            print(f"error: {exc.message}", file=err)
            return _USAGE
        try:
            await engine.start(name)
        except CallError as exc:
            print(exc.one_line(), file=err)
            tail = getattr(exc, "stderr_tail", "")
            if tail and tail not in exc.one_line():
                print(tail, file=err)
            return _CALL_FAILED
        manifest = engine.manifest(name)
        cap_def = manifest.find_cap(cap) if manifest is not None else None
        if cap_def is None and not cap.startswith("cap:"):
            aliases = sorted(a for c in manifest.iter_caps() for a in c.aliases) if manifest else []
            print(f"error: unknown cap or alias {cap!r}; available: {', '.join(aliases)}", file=err)
            return _USAGE
        cap_urn = cap_def.urn if cap_def is not None else cap
        declared = [a.media_urn for a in cap_def.args] if cap_def is not None else []
        main_urn: str | None = None
        main_decl: str | None = None
        if cap_def is not None:
            for a in cap_def.args:
                for src in a.sources:
                    if isinstance(src, StdinSource):
                        main_urn, main_decl = src.media_urn, a.media_urn
        inputs: list[tuple[str, Any]] = []
        given: set[str] = set()
        for text in args:
            try:
                urn, value = _split_arg(text, declared)
            except ValueError as exc:
                print(f"error: {exc}", file=err)
                return _USAGE
            given.add(urn)
            inputs.append(
                (urn, Path(value[1:]) if value.startswith("@") else value.encode("utf-8"))
            )
        if (
            main_urn is not None
            and main_urn not in given
            and main_decl not in given
            and not sys.stdin.isatty()
        ):
            info = os.fstat(0)
            if stat.S_ISREG(info.st_mode):  # a file: sent with its size (for progress)
                if info.st_size:
                    inputs.insert(0, (main_urn, Path("/dev/stdin")))
            else:
                first = await anyio.to_thread.run_sync(os.read, 0, 1 << 18)
                if first:
                    inputs.insert(0, (main_urn, _stdin_chunks(first)))

        sink: IO[bytes] = open(output, "wb") if output is not None else sys.stdout.buffer  # noqa: SIM115, ASYNC230
        bar: Any = None
        task: Any = None
        try:
            async with engine.call(cap_urn, inputs) as response:
                async for ev in response:
                    if isinstance(ev, OutputData) and ev.output is None:
                        v = ev.value
                        if isinstance(v, bytes):
                            sink.write(v)
                        elif isinstance(v, str):
                            sink.write(v.encode("utf-8"))
                        else:
                            _emit_item(sink, v)
                    elif isinstance(ev, OutputItem) and ev.output is None:
                        _emit_item(sink, ev.value)
                    elif isinstance(ev, Progress):
                        if tty:
                            if bar is None:
                                from rich.progress import Progress as Bar

                                bar = Bar(transient=True)
                                bar.start()
                                task = bar.add_task(ev.message or cap, total=1.0)
                            bar.update(task, completed=ev.progress, description=ev.message or cap)
                        else:
                            print(f"[PROGRESS {round(ev.progress * 100)}%] {ev.message}", file=err)
                    elif isinstance(ev, Log):
                        tag = f"{ev.level.upper()} {ev.attribution_class or ''}".strip()
                        line = f"[{tag}] {ev.message}"
                        if ev.arg_urn:
                            line += f" arg={ev.arg_urn}"
                        print(line, file=err)
                    sink.flush()
        except CallError as exc:
            if bar is not None:
                bar.stop()
            print(exc.one_line(), file=err)
            return _CALL_FAILED
        finally:
            if bar is not None:
                bar.stop()
            if output is not None:
                sink.close()
    return 0


@app.command("call")
def call_command(
    target: str = typer.Argument(
        ..., help="The cartridge: a .py script, an executable, or a path."
    ),
    cap: str = typer.Argument(..., help="A cap URN, or an alias from the cartridge's manifest."),
    arg: list[str] = typer.Option(  # noqa: B008
        [], "--arg", "-a", help="An input: MEDIA_URN=VALUE, or MEDIA_URN=@PATH for a file's bytes."
    ),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the main output here."),  # noqa: B008
    cartridge: list[str] = typer.Option(  # noqa: B008
        [], "--cartridge", help="Another cartridge to load (for peer calls); may be repeated."
    ),
) -> None:
    """Call one cap of a cartridge and stream its main output to stdout."""
    code = anyio.run(_run_call, target, cap, list(arg), output, list(cartridge))
    raise typer.Exit(code)
