"""A context built once per cartridge, specialised per call: resources and
start-up/shutdown hooks on the runtime, per-request DryContext and WetContext derived from it,
and no context ``repr`` showing a value."""

from __future__ import annotations

import anyio
import pytest

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import (
    REQUEST_KEY,
    BlockingWetContext,
    CartridgeContext,
    CartridgeRuntime,
    DryContext,
    Key,
    Op,
    WetContext,
)
from cartridge_runtime.testing import CartridgeHarness, call_sync

TEXT = "media:enc=utf-8"
ASK = 'cap:in="media:enc=utf-8";op=ask;out="media:enc=utf-8"'
ASK_SYNC = 'cap:in="media:enc=utf-8";op=ask-sync;out="media:enc=utf-8"'
MODEL: Key[dict[str, str]] = Key("model")
TOKEN: Key[str] = Key("token")


def _runtime(events: list[str], seen: list[tuple[DryContext, WetContext]]) -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="asker",
            version="1.0.0",
            description="ask",
            caps=[
                CapDef.simple(ASK, "Ask", aliases="ask"),
                CapDef.simple(ASK_SYNC, "Ask sync", aliases="ask-sync"),
            ],
        )
    )

    @runtime.on_startup
    async def load(ctx: CartridgeContext) -> None:
        events.append("load")
        ctx.set(MODEL, {"answer": "42"})
        ctx.set(TOKEN, "s3cr3t-value")

    @runtime.on_shutdown
    def unload(ctx: CartridgeContext) -> None:
        events.append("unload")
        ctx.remove(MODEL)

    class Ask(Op):
        async def perform(self, dry: DryContext, wet: WetContext) -> None:
            seen.append((dry, wet))
            wet.set("mine", dry.request_id)  # stays in this request
            assert wet.cartridge is runtime.context
            await wet.request.output().emit_text(wet[MODEL]["answer"])

    class AskSync(Op):
        def perform(self, dry: DryContext, wet: BlockingWetContext) -> None:
            assert wet.get(TOKEN) == "s3cr3t-value"
            wet.request.output().emit_text(wet[MODEL]["answer"] + "!")

    runtime.register_op(ASK, Ask)
    runtime.register_op(ASK_SYNC, AskSync)
    return runtime


def test_resources_are_made_once_and_each_call_gets_its_own_contexts() -> None:
    events: list[str] = []
    seen: list[tuple[DryContext, WetContext]] = []
    runtime = _runtime(events, seen)

    async def main() -> None:
        async with CartridgeHarness(runtime) as h:
            assert runtime.context.started and events == ["load"]
            for _ in range(2):
                result = await h.call(ASK, [(TEXT, b"?")])
                assert result.main_bytes == b"42"
            assert (await h.call(ASK_SYNC, [(TEXT, b"?")])).main_bytes == b"42!"

    anyio.run(main)
    assert events == ["load", "unload"]
    assert not runtime.context.started and MODEL not in runtime.context
    (dry1, wet1), (dry2, wet2) = seen
    assert dry1 is not dry2 and dry1.request_id and dry1.request_id != dry2.request_id
    assert dry1.cartridge == "asker" and dry1.cap_urn == ASK
    assert wet1 is not wet2
    assert wet1["mine"] == dry1.request_id and wet2["mine"] == dry2.request_id
    assert "mine" not in runtime.context  # a request's own entries never reach the cartridge
    # derived, not copied: a resource added later is visible through an old request context
    runtime.context.set("late", 1)
    assert wet1["late"] == 1 and "late" in wet1 and "late" in list(wet1)


def test_no_context_repr_shows_a_value() -> None:
    events: list[str] = []
    seen: list[tuple[DryContext, WetContext]] = []
    runtime = _runtime(events, seen)
    assert call_sync(runtime, ASK, [(TEXT, b"?")]).ok
    dry, wet = seen[0]
    runtime.context.set(TOKEN, "s3cr3t-value")
    for text in (repr(dry), repr(wet), repr(runtime.context)):
        assert "s3cr3t-value" not in text and "42" not in text
        assert ASK not in text and dry.request_id not in text
    assert "token" in repr(wet) and "request" in repr(wet) and "model" not in repr(wet)
    assert "request_id" in repr(dry) and "cap_urn" in repr(dry)
    assert "token" in repr(runtime.context)


def test_a_failing_start_up_hook_stops_serving_with_status_1() -> None:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="broken",
            version="1.0.0",
            description="x",
            caps=[CapDef.simple(ASK, "A", aliases="a")],
        )
    )
    ran: list[str] = []

    @runtime.on_startup
    def fail(ctx: CartridgeContext) -> None:
        raise RuntimeError("no model file")

    runtime.on_shutdown(lambda ctx: ran.append("shutdown"))

    class _Unused(anyio.abc.ByteStream):  # start-up fails before any byte moves
        async def receive(self, max_bytes: int = 65536) -> bytes:
            raise AssertionError("read")

        async def send(self, item: bytes) -> None:
            raise AssertionError("written")

        async def send_eof(self) -> None:
            pass

        async def aclose(self) -> None:
            pass

    async def main() -> int:
        return await runtime.serve(_Unused(), _Unused())

    assert anyio.run(main) == 1
    assert ran == [] and not runtime.context.started


def test_hooks_run_around_a_cli_mode_call() -> None:
    events: list[str] = []
    runtime = _runtime(events, [])
    from cartridge_runtime.runtime._cli._local import invoke_local

    class Sink:
        def __init__(self) -> None:
            self.data: list[bytes] = []

        async def write(self, spec: object, data: bytes) -> None:
            self.data.append(bytes(data))

    sink = Sink()

    async def main() -> None:
        await invoke_local(runtime, ASK, [(TEXT, b"?")], sink)

    anyio.run(main)
    assert events == ["load", "unload"] and sink.data == [b"42"]


def test_a_hand_made_wet_context_still_works() -> None:
    wet = WetContext()
    wet.set(REQUEST_KEY, "r")  # type: ignore[misc]
    assert wet.cartridge is None and wet["request"] == "r"
    derived = wet.derive(extra=1)
    assert derived["extra"] == 1 and "extra" not in wet
    with pytest.raises(KeyError):
        wet["nothing"]
