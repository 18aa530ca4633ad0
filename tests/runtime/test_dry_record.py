"""A request's :class:`DryContext` made in one C call (``slotted_maker``) is the one its class
makes, and the maker refuses a class whose slots it would not all set."""

from __future__ import annotations

import os
from typing import Any

import attrs
import pytest

from cartridge_runtime.protocol import Limits, MessageId, slotted_maker
from cartridge_runtime.runtime._cartridge_context import CartridgeContext
from cartridge_runtime.runtime._context import DryContext

_FIELDS = ("cap_urn", "handler_urn", "limits", "policy", "dry_run", "cartridge", "message_id")
_COMPILED = not os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON")


@pytest.mark.parametrize("policy", [None, "full"])
@pytest.mark.parametrize("rid", [None, "id"])
def test_the_request_context_is_the_one_the_class_makes(policy: str | None, rid: Any) -> None:
    message_id = MessageId.new() if rid else None
    limits = Limits()
    made = CartridgeContext("cart").dry(
        cap_urn="cap:op=x", handler_urn="urn", limits=limits, policy=policy, message_id=message_id
    )
    plain = DryContext(
        cap_urn="cap:op=x",
        handler_urn="urn",
        limits=limits,
        policy=policy,
        message_id=message_id,
        cartridge="cart",
    )
    assert type(made) is DryContext
    assert attrs.asdict(made, recurse=False) == attrs.asdict(plain, recurse=False)
    assert made == plain and hash(made) == hash(plain)
    assert made.request_id == plain.request_id
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.cap_urn = "other"  # type: ignore[misc]


def test_the_maker_sets_every_field_in_order() -> None:
    make = slotted_maker(DryContext, _FIELDS)
    if not _COMPILED:
        assert make is None
        return
    assert make is not None
    made = make(*(f"v{i}" for i in range(len(_FIELDS))))
    assert [getattr(made, name) for name in _FIELDS] == [f"v{i}" for i in range(len(_FIELDS))]
    with pytest.raises(TypeError):
        make("too", "few")


class _Open:
    pass


@attrs.frozen
class _Pair:
    a: int
    b: int


@pytest.mark.parametrize(
    ("cls", "names"),
    [
        (_Open, ()),  # keeps a dict
        (_Pair, ("a",)),  # a slot not named would stay unset
        (_Pair, ("a", "c")),  # no such slot
        (_Pair, ("a", "a")),  # named twice
    ],
)
def test_the_maker_refuses_what_it_would_not_set_whole(cls: type, names: tuple[str, ...]) -> None:
    assert slotted_maker(cls, names) is None


def test_a_maker_of_a_whole_class_is_given_when_compiled() -> None:
    assert (slotted_maker(_Pair, ("b", "a")) is not None) is _COMPILED
