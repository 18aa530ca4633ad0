from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, OpError, Request, WetContext

SHOUT = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";shout'
WORDS = 'cap:in="media:enc=utf-8";out="media:enc=utf-8;list";words'

manifest = Manifest.build(
    name="shout",
    version="1.0.0",
    description="Upper-case and split text",
    caps=[
        CapDef.simple(SHOUT, "Shout", aliases="shout", description="Upper-case the text"),
        CapDef.simple(
            WORDS,
            "Words",
            aliases="words",
            description="One item per word",
            output_is_sequence=True,
        ),
    ],
)
runtime = CartridgeRuntime(manifest)


@runtime.op(SHOUT)  # the decorator form: a function that gets the Request
async def shout(req: Request) -> None:
    text = await req.take_input().require_stream_str("media:enc=utf-8")
    if not text.strip():
        raise OpError("EMPTY_TEXT", "nothing to shout", "input", arg_urn="media:enc=utf-8")
    await req.output().emit_text(text.upper())


class Words(Op):  # the class form: perform(dry, wet), a fresh instance per request
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        text = await wet.request.take_input().require_stream_str("media:enc=utf-8")
        out = wet.request.output()
        words = text.split()
        for i, word in enumerate(words, 1):
            await out.emit_text(word, meta={"index": i})
            await out.progress((i - 1) / len(words), f"word {i}")


runtime.register_op(WORDS, Words)

if __name__ == "__main__":
    runtime.run()  # no arguments: Bifaci frames on stdio; arguments: a command-line tool
