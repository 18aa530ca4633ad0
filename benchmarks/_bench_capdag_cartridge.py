"""A tiny cartridge written with the reference runtime (capdag 1.524.58), for benchmarks only.

It is the capdag side of the side-by-side benchmark (``benchmarks/bench.py``): the
same two jobs as ``cartridges/interop.py``'s ``echo`` and ``double`` caps, built
with capdag's ``CartridgeRuntime`` and ``Op`` so that the reference host, and our
engine, can drive a cartridge that uses the reference's own code paths.

Caps (looked up by alias, like every cartridge in the benchmark):

* ``echo``: the main input's bytes back, streamed chunk by chunk (constant memory).
* ``double``: JSON ``{"value": N}`` in, JSON ``2N`` out.

capdag is a test-only dependency of this project; this file is never imported
by ``cartridge_runtime``.
"""

from __future__ import annotations

import json
from typing import Any

from capdag.bifaci.cartridge_runtime import WET_KEY_REQUEST, CartridgeRuntime, HandlerError
from ops import DryContext, Op, OpMetadata, WetContext  # type: ignore[import-untyped]

ECHO_URN = "cap:bench-echo"
DOUBLE_URN = "cap:bench-double"


def _cap(urn: str, title: str, alias: str, what: str) -> dict[str, Any]:
    """One cap entry of the manifest: bytes in on stdin, bytes out."""
    return {
        "urn": urn,
        "title": title,
        "aliases": [alias],
        "cap_description": what,
        "args": [
            {
                "media_urn": "media:",
                "name": "input",
                "required": True,
                "sources": [{"stdin": "media:"}],
                "arg_description": "input bytes",
                "is_sequence": False,
                "streaming": False,
            }
        ],
        "outputs": [
            {
                "media_urn": "media:",
                "name": "output",
                "output_description": "result bytes",
                "optional": False,
                "is_sequence": False,
                "streaming": False,
            }
        ],
    }


MANIFEST: dict[str, Any] = {
    "name": "bench-capdag",
    "version": "0.1.0",
    "channel": "nightly",
    "registry_url": None,
    "description": "Benchmark peer built with the reference runtime",
    "cap_groups": [
        {
            "name": "default",
            "caps": [
                _cap("cap:effect=none", "Identity", "identity", "Echoes its input unchanged."),
                _cap(ECHO_URN, "Echo", "echo", "Streams the input back unchanged."),
                _cap(DOUBLE_URN, "Double", "double", 'JSON {"value": N} to JSON 2N.'),
            ],
        }
    ],
}


def _request(wet: WetContext) -> Any:
    return wet.get_required(WET_KEY_REQUEST)


class EchoOp(Op):  # type: ignore[misc]
    """Stream every input chunk straight back (the reference identity pattern)."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = _request(wet)
        package = req.take_input()
        emitter = req.emitter()
        while True:
            stream = package.recv()
            if stream is None:
                break
            if isinstance(stream, Exception):
                raise HandlerError(f"echo input error: {stream}")
            while True:
                item = stream.recv()
                if item is None:
                    break
                if isinstance(item, Exception):
                    raise HandlerError(f"echo chunk error: {item}")
                emitter.emit_cbor(item[0])

    def metadata(self) -> OpMetadata:
        return OpMetadata.builder("EchoOp").description("streamed echo").build()


class DoubleOp(Op):  # type: ignore[misc]
    """Read ``{"value": N}`` and answer ``2N`` as JSON bytes."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = _request(wet)
        data = req.take_input().collect_all_bytes()
        value = json.loads(data)["value"]
        req.emitter().emit_cbor(json.dumps(2 * value).encode())

    def metadata(self) -> OpMetadata:
        return OpMetadata.builder("DoubleOp").description("doubles a number").build()


def main() -> None:
    """Serve CBOR frames on stdio (no argv) or act as a CLI (``manifest``, aliases)."""
    runtime = CartridgeRuntime(json.dumps(MANIFEST).encode())
    runtime.register_op_type(ECHO_URN, EchoOp)
    runtime.register_op_type(DOUBLE_URN, DoubleOp)
    runtime.run()


if __name__ == "__main__":
    main()
