"""Arguments checked against the cap definition before anything is sent:
the pure checker, and the engine refusing a call before its REQ leaves."""

from __future__ import annotations

import pickle
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import ArgumentError, CallError, Engine, Item
from cartridge_runtime.engine._arguments import check_call_inputs
from cartridge_runtime.manifest import ArgDef, CapDef

TEXT = "media:enc=utf-8"
LANG = "media:enc=utf-8;lang"
TAGS = "media:enc=utf-8;tag"
SECRET = "media:enc=utf-8;secret-token"
CAP = 'cap:in="media:enc=utf-8";op=probe;out="media:enc=utf-8"'

DEF = CapDef.simple(
    CAP,
    "Probe",
    aliases="probe",
    input_name="text",
    extra_args=[
        ArgDef.flag(LANG, "--lang", name="lang", required=True),
        ArgDef.flag(TAGS, "--tag", name="tags", is_sequence=True),
        ArgDef.flag(SECRET, "--token", name="token"),
        ArgDef.flag(
            "media:enc=utf-8;mode", "--mode", name="mode", required=True, default_value="a"
        ),
    ],
)


def _refusal(inputs: list[tuple[str, object]]) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        check_call_inputs(CAP, DEF, inputs)
    return info.value


def test_fitting_inputs_pass() -> None:
    check_call_inputs(CAP, DEF, [(TEXT, b"x"), (LANG, "fr"), (TAGS, [b"a", Item(value=b"b")])])
    # a more specific media URN conforms to the argument it refines
    check_call_inputs(CAP, DEF, [("media:enc=utf-8;ext=md", b"x"), ("media:lang;enc=utf-8", b"")])


def test_a_required_argument_missing_is_named() -> None:
    err = _refusal([(TEXT, b"x")])
    assert (err.code, err.attribution_class) == ("MISSING_INPUT", "input")
    assert err.arg == "lang" and err.arg_urn == LANG and err.index is None
    assert "arg 'lang'" in str(err) and "required" in err.reason


def test_an_input_no_argument_takes_is_refused_with_its_position() -> None:
    err = _refusal([(TEXT, b"x"), (LANG, b"fr"), ("media:ext=pdf", b"%PDF")])
    assert (err.code, err.index, err.arg, err.arg_urn) == ("INVALID_INPUT", 2, None, None)
    assert "'lang'" in err.reason  # lists the args it could have been


def test_an_unparseable_media_urn_is_refused() -> None:
    err = _refusal([("cap:nope", b"x")])
    assert err.index == 0 and "does not parse" in err.reason


def test_a_sequence_only_where_the_argument_takes_one() -> None:
    err = _refusal([(TEXT, b"x"), (LANG, ["fr", "en"])])
    assert (err.code, err.arg, err.index) == ("INVALID_INPUT", "lang", 1)
    assert "takes one value" in err.reason


def test_messages_never_carry_values() -> None:
    err = _refusal([(TEXT, b"x"), (SECRET, [b"hunter2"])])
    assert err.arg == "token"
    for text in (str(err), repr(err), err.message, err.reason):
        assert "hunter2" not in text
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, ArgumentError) and again.arg == "token" and str(again) == str(err)


def test_a_definition_without_arguments_is_not_checked() -> None:
    bare = CapDef(urn="cap:op=bare", title="Bare", aliases="bare")
    check_call_inputs("cap:op=bare", bare, [("media:anything", b"")])


_CARTRIDGE = textwrap.dedent(
    """
    import os, sys
    from cartridge_runtime.manifest import ArgDef, CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, Request

    CAP = 'cap:in="media:enc=utf-8";op=probe;out="media:enc=utf-8"'
    runtime = CartridgeRuntime(Manifest.build(
        name="probe", version="1.0.0", description="probe",
        caps=[CapDef.simple(CAP, "Probe", aliases="probe", extra_args=[
            ArgDef.flag("media:enc=utf-8;lang", "--lang", name="lang", required=True)])],
    ))

    @runtime.op(CAP)
    async def probe(req: Request) -> None:
        open(os.environ["PROBE_MARK"], "a").write("called\\n")
        await req.output().emit_text("ok")

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.mark.asyncio
async def test_the_engine_refuses_before_sending(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(_CARTRIDGE)
    mark = tmp_path / "mark"
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], env={"PROBE_MARK": str(mark)})
        with pytest.raises(ArgumentError) as info:
            await engine.call(CAP, [(TEXT, "hi")], timeout=60)
        assert isinstance(info.value, CallError)
        assert info.value.arg == "lang" and info.value.code == "MISSING_INPUT"
        with pytest.raises(ArgumentError):
            async with engine.call(CAP, [(TEXT, "hi"), (LANG, ["a", "b"])], timeout=60):
                pass
        assert not mark.exists()  # no REQ reached the cartridge
        ok = await engine.call(CAP, [(TEXT, "hi"), (LANG, "fr")], timeout=60)
        assert ok.data == b"ok" and mark.read_text() == "called\n"
