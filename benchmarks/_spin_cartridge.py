#!/usr/bin/env python3
"""A CPU-bound cartridge for ``benchmarks/replicas.py``: ``spin`` burns the CPU for a fixed
amount of work (``N`` rounds of an integer hash, ``N`` given as the input text) and answers
the last value, so a call costs CPU time in the cartridge and almost nothing in the engine."""

from __future__ import annotations

from typing import Final

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

TEXT: Final = "media:enc=utf-8"
SPIN: Final = f'cap:in="{TEXT}";op=spin;out="{TEXT}"'

MANIFEST: Final = Manifest.build(
    name="spin",
    version="1.0.0",
    description="Burns CPU per call",
    caps=[
        CapDef(
            urn=SPIN,
            title="Spin",
            aliases=("spin",),
            args=[ArgDef.stdin(TEXT, name="rounds", description="rounds of work")],
            outputs=[OutputDef(media_urn=TEXT, name="value", output_description="the value")],
        )
    ],
)


def spin(rounds: int) -> int:
    """``rounds`` steps of a 64-bit multiplicative hash: pure CPU, no allocation to speak of."""
    value = 0x9E3779B97F4A7C15
    for i in range(rounds):
        value = ((value ^ i) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


class Spin(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        rounds = int(await wet.request.take_input().require_stream_str(TEXT))
        await wet.request.output().write(str(spin(rounds)).encode())


runtime = CartridgeRuntime(MANIFEST)
runtime.register_op(SPIN, Spin)

if __name__ == "__main__":
    runtime.run()
