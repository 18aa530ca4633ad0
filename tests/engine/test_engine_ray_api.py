"""The Ray placement's API without a cluster: importing never imports Ray, and bad arguments
are refused with precise errors when the placement is made."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from cartridge_runtime.engine import Engine, Placement


@pytest.mark.parametrize("module", ["cartridge_runtime.engine", "cartridge_runtime.engine.ray"])
def test_importing_the_engine_does_not_import_ray(module: str) -> None:
    code = f"import sys, {module}; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_ray_placement_is_a_placement_and_describes_what_it_reserves() -> None:
    pytest.importorskip("ray")
    from cartridge_runtime.engine.ray import INIT_TIMEOUT, RayPlacement

    placement = RayPlacement(num_cpus=2, num_gpus=1, resources={"big": 1}, placement_timeout=5)
    assert isinstance(placement, Placement)
    assert placement.request() == {"CPU": 2, "GPU": 1, "big": 1}
    assert placement.launch_timeout == INIT_TIMEOUT + 5
    assert RayPlacement(num_cpus=0).request() == {}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"num_cpus": -1}, "num_cpus must be a number of at least 0, not -1"),
        ({"num_gpus": float("nan")}, "num_gpus must be"),
        ({"placement_timeout": True}, "placement_timeout must be"),
        ({"resources": {"": 1}}, "resource names are strings"),
        ({"resources": {"big": -2}}, "resource 'big' must be"),
        ({"address": ""}, "address must be None, 'auto' or 'ray://...'"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], words: str) -> None:
    pytest.importorskip("ray")
    from cartridge_runtime.engine.ray import RayPlacement

    with pytest.raises(ValueError, match="RayPlacement") as info:
        RayPlacement(**kwargs)
    assert words in str(info.value)


def test_a_ray_placement_resolves_targets_as_a_subprocess_does(tmp_path: Any) -> None:
    pytest.importorskip("ray")
    from cartridge_runtime.engine import CartridgeNotFound
    from cartridge_runtime.engine.ray import RayPlacement

    script = tmp_path / "tool.py"
    script.write_text("")
    target = RayPlacement().resolve(script)
    assert target.label == "tool" and target.command == (sys.executable, str(script))
    with pytest.raises(CartridgeNotFound):
        Engine().add_cartridge(tmp_path / "missing.py", placement=RayPlacement())
    with pytest.raises(TypeError):
        RayPlacement().resolve(42)
