"""Machine notation errors that help a first user, one name per step everywhere, and
constants drawn in Mermaid as in DOT."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _machine_world import CAPS, headers

from cartridge_runtime.machine import MachineError, parse_machine

ROOT = Path(__file__).resolve().parents[2]
WORDKIT = str(ROOT / "cartridges" / "wordkit.py")
CLI = [sys.executable, "-m", "cartridge_runtime.cli"]


def _refusal(text: str) -> MachineError:
    with pytest.raises(MachineError) as caught:
        parse_machine(text, CAPS)
    return caught.value


@pytest.mark.parametrize("wiring", ["doc->words->ws", "doc-> words -> ws"])
def test_a_glued_arrow_says_to_put_spaces_around_it(wiring: str) -> None:
    error = _refusal(f"{headers('words')}\n{wiring}")
    assert "put spaces around '->'" in error.message


def test_a_spaced_arrow_gets_no_such_hint() -> None:
    error = _refusal(f"{headers('words')}\ndoc -> words -> ws ->")
    assert "put spaces" not in error.message


def test_an_unknown_step_offers_the_closest_aliases() -> None:
    error = _refusal(f"{headers('words', 'upper')}\ndoc -> wrds -> ws")
    assert "did you mean 'words'?" in error.message


def test_an_unknown_step_far_from_all_offers_nothing() -> None:
    error = _refusal(f"{headers('words')}\ndoc -> zzzzzz -> ws")
    assert "did you mean" not in error.message


def test_a_step_used_twice_has_one_name_everywhere(tmp_path: Path) -> None:
    machine = tmp_path / "twice.machine"
    machine.write_text(
        'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
        'upper cap:in="media:enc=utf-8;word";op=upper;out="media:enc=utf-8;word"\n'
        "doc -> split -> words\nwords -> upper -> loud\nloud -> upper -> louder\n"
    )
    check = subprocess.run([*CLI, "machine", "check", str(machine), "-c", WORDKIT, "--json"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert check.returncode == 0, check.stderr
    steps = json.loads(check.stdout)["steps"]
    assert [s["name"] for s in steps] == ["split", "upper", "upper#2"]
    assert steps[1]["inputs"] == ["word=words"] and steps[2]["outputs"] == ["upper=louder"]
    table = subprocess.run([*CLI, "machine", "check", str(machine), "-c", WORDKIT],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "upper#2" in table.stdout
    run = subprocess.run([*CLI, "run", str(machine), "-c", WORDKIT, "-i", "doc=a b", "--json"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sorted(json.loads(run.stdout)["steps"]) == ["split", "upper", "upper#2"]


def test_mermaid_draws_constants_as_dot_does() -> None:
    machine = parse_machine(
        f'{headers("words", "join")}\ndoc -> words -> ws\n(ws, sep=", ") -> join -> out', CAPS
    )
    mermaid = machine.to_mermaid()
    dot = machine.to_dot()
    assert '"\\", \\""' in dot  # DOT's note with the constant
    line = next(ln for ln in mermaid.splitlines() if "#quot;, #quot;" in ln)
    given = line.strip().split("[", 1)[0]
    assert any(ln.strip().startswith(f"{given} -->|sep|") for ln in mermaid.splitlines())
