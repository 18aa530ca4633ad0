"""``cartridge machine check|show FILE --cartridge PATH ...``: read a machine file against the
caps of some cartridges (each started only to read its manifest).

``check`` prints the canonical form (protocol_spec/12-machines.md, MCH-7) and a table of the
steps; with ``--json`` one object, ``{"ok": true, "notation": ...}`` or ``{"ok": false,
"kind": ..., "message": ..., "line": ..., "column": ...}``. ``show`` draws the machine: a tree
in the terminal, or Mermaid or Graphviz DOT text. Exit status: 0 the machine resolves, 1 it is
refused (one line ``Kind: where: what [MCH-n]`` on stderr), 2 a usage error (no such file, a
cartridge path that names nothing or a cartridge that does not start).
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer

from ._app import sub_app
from ._console import console
from ._lines import start_failure_line
from ._usage import UsageError

if TYPE_CHECKING:
    from ..machine import Machine, MachineError, Step

__all__ = ("machine_app", "check_command", "show_command", "Format")

_REFUSED = 1
_USAGE = 2

machine_app = sub_app("machine", "Check and draw machines: pipelines of caps in machine notation.")


class Format(enum.StrEnum):
    TREE = "tree"
    MERMAID = "mermaid"
    DOT = "dot"


def _check_paths(file: Path, cartridges: list[str]) -> None:
    if not file.is_file():
        raise UsageError(f"{file}: no such machine file")
    for target in cartridges:
        if not (Path(target).is_file() or (os.sep not in target and shutil.which(target))):
            raise UsageError(f"--cartridge {target}: no such file or command")


async def _resolve(file: Path, cartridges: list[str]) -> Machine | MachineError | UsageError:
    from ..engine import CallError, Engine, EngineError
    from ..machine import MachineError

    # Every failure is caught inside the engine's block: one raised through its exit would
    # come out wrapped in an exception group.
    async with Engine() as engine:
        for target in cartridges:
            engine.add_cartridge(target)
        try:
            return await engine.machine(file)
        except MachineError as error:
            return error
        except CallError as error:
            return UsageError(f"a cartridge does not start: {start_failure_line(error)}")
        except EngineError as error:
            return UsageError(str(error))


def _load(file: Path, cartridges: list[str]) -> Machine:
    """The resolved machine.

    :raises UsageError: a usage error.
    :raises MachineError: the machine is refused.
    """
    _check_paths(file, cartridges)
    answer = anyio.run(_resolve, file, cartridges)
    if isinstance(answer, Exception):
        raise answer
    return answer


def _node_text(machine: Machine, name: str) -> str:
    node = machine.node(name)
    return node.label if node.label is not None else name


def _shown_name(name: str, step: Step) -> str:
    """A step's name (:attr:`Machine.step_names`), with the machines it was included from."""
    return f"{name} (in {' > '.join(step.included_as)})" if step.included_as else name


def _steps_json(machine: Machine) -> list[dict[str, Any]]:
    """The step table as ``machine check --json`` carries it."""
    return [
        {
            "name": name,
            "cap": str(step.cap),
            "per_item": step.placement.per_item,
            "inputs": _inputs_text(machine, step),
            "outputs": _outputs_text(machine, step),
            "included_from": list(step.included_as),
        }
        for name, step in zip(machine.step_names, machine.steps, strict=True)
    ]


def _inputs_text(machine: Machine, step: Step) -> list[str]:
    from ..machine import constant_text

    return [
        f"{b.arg}={constant_text(b.constant)}"
        if b.node is None
        else f"{b.arg}={_node_text(machine, b.node)}"
        for b in step.bindings
    ]


def _outputs_text(machine: Machine, step: Step) -> list[str]:
    return [f"{o.output}={_node_text(machine, o.node)}" for o in step.outputs]


def _table(machine: Machine) -> Any:
    from rich.markup import escape as e
    from rich.table import Table

    table = Table()
    for column in ("step", "cap", "per item", "inputs", "outputs"):
        table.add_column(column)
    for name, step in zip(machine.step_names, machine.steps, strict=True):
        table.add_row(
            e(_shown_name(name, step)),
            e(str(step.cap)),
            "yes" if step.placement.per_item else "no",
            e(", ".join(_inputs_text(machine, step))),
            e(", ".join(_outputs_text(machine, step))),
        )
    return table


def _tree(machine: Machine) -> Any:
    from rich.markup import escape as e
    from rich.tree import Tree

    strands = len(machine.strands)
    root = Tree(
        f"[bold]machine[/] ({strands} strand{'' if strands == 1 else 's'}, {len(machine)} steps)"
    )
    names = dict(zip(map(id, machine.steps), machine.step_names, strict=True))
    for strand in machine.strands:
        ins = ", ".join(_node_text(machine, n) for n in strand.inputs)
        outs = ", ".join(_node_text(machine, n) for n in strand.outputs)
        branch = root.add(f"[bold]strand {strand.index}[/]  in: {e(ins)}  out: {e(outs)}")
        for step in strand.steps:
            mark = " [yellow](per item)[/]" if step.placement.per_item else ""
            policy = []
            if step.policy.retry:
                policy.append(f"retry={step.policy.retry}")
            if step.policy.on_error.value != "fail":
                policy.append(f"on_error={step.policy.on_error.value}")
            extra = f" {{{', '.join(policy)}}}" if policy else ""
            node = branch.add(
                f"[cyan]{e(_shown_name(names[id(step)], step))}[/]{mark}{extra}  "
                f"[dim]{e(str(step.cap))}[/]"
            )
            for text in _inputs_text(machine, step):
                node.add(f"← {e(text)}")
            for text in _outputs_text(machine, step):
                node.add(f"→ {e(text)}")
    return root


def _refused(error: Exception, as_json: bool) -> None:
    from ..machine import MachineError

    assert isinstance(error, MachineError)
    if as_json:
        print(json.dumps({"ok": False, "kind": error.kind, "message": error.message,
                          "line": error.line, "column": error.column}))  # fmt: skip
    else:
        print(f"{error.kind}: {error}", file=sys.stderr)
    raise typer.Exit(_REFUSED)


_FILE = typer.Argument(..., help="The machine file (machine notation).")
_CARTRIDGES = typer.Option(
    [], "--cartridge", "-c", help="A cartridge whose caps the machine uses; may be repeated."
)

_FORMAT = typer.Option(Format.TREE, "--format", "-f", help="tree, mermaid or dot.")


@machine_app.command("check")
def check_command(
    file: Path = _FILE,
    cartridge: list[str] = _CARTRIDGES,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Resolve a machine; print its canonical form and its steps."""
    from ..machine import MachineError

    try:
        machine = _load(file, list(cartridge))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    except MachineError as error:
        _refused(error, as_json)
    if as_json:
        report = {"ok": True, "notation": machine.to_notation(), "steps": _steps_json(machine)}
        print(json.dumps(report))
    else:
        sys.stdout.write(machine.to_notation() + "\n\n")
        sys.stdout.flush()
        console().print(_table(machine))
    raise typer.Exit(0)


@machine_app.command("show")
def show_command(
    file: Path = _FILE,
    cartridge: list[str] = _CARTRIDGES,
    fmt: Format = _FORMAT,
) -> None:
    """Draw a machine: a tree, or Mermaid or DOT text."""
    from ..machine import MachineError

    try:
        machine = _load(file, list(cartridge))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(_USAGE) from None
    except MachineError as error:
        _refused(error, False)
    if fmt is Format.MERMAID:
        sys.stdout.write(machine.to_mermaid().rstrip("\n") + "\n")
    elif fmt is Format.DOT:
        sys.stdout.write(machine.to_dot().rstrip("\n") + "\n")
    else:
        console().print(_tree(machine))
    raise typer.Exit(0)
