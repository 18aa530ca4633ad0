"""The handlers every runtime registers first: identity, discard and adapter selection."""

from __future__ import annotations

from ._context import DryContext, Op, WetContext


class IdentityOp(Op):
    """Identity: echoes its input unchanged, value by value, as it arrives."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        out = req.output()
        started = False
        async for stream in req.take_input():
            if not started:
                # The first stream's meta travels on (provenance), as the reference does.
                await out.start(False, stream.meta)
                started = True
            async for value in stream.values():
                if isinstance(value, bytes):
                    await out.write(value)
                else:
                    await out.emit_cbor(value)


class DiscardOp(Op):
    """Discard: drains every input, produces nothing."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        async for stream in wet.request.take_input():
            async for _ in stream.values():
                pass


class AdapterSelectionOp(Op):
    """Default adapter selection: drains the input and answers with no match (an empty output)."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        async for stream in wet.request.take_input():
            async for _ in stream.values():
                pass
