"""The one-step check of a common REQ (``no_rule_applies``) never skips a rule that applies."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cartridge_runtime.protocol import REQ_RULES, Frame, FrameType, MessageId
from cartridge_runtime.protocol._cartridge_admission import no_rule_applies


class _Handlers:
    def __init__(self, identity: bool) -> None:
        self.identity = identity

    def is_identity(self, cap: str) -> bool:
        return self.identity


class _Side:
    def __init__(self, requests: set[Any], policy: Any, identity: bool, limit: int) -> None:
        self.requests = requests
        self.policy = policy
        self.handlers = _Handlers(identity)
        self.max_open_requests = limit


@given(
    open_ids=st.sets(st.integers(1, 4), max_size=4),
    rid=st.integers(1, 5),
    cap=st.none() | st.sampled_from(["", "cap:op=x"]),
    payload=st.none() | st.sampled_from([b"", b"x"]),
    policy=st.none() | st.just("full"),
    identity=st.booleans(),
    limit=st.integers(0, 6),
)
def test_a_req_told_common_in_one_step_is_one_no_rule_refuses(
    open_ids: set[int],
    rid: int,
    cap: str | None,
    payload: bytes | None,
    policy: str | None,
    identity: bool,
    limit: int,
) -> None:
    side = _Side({MessageId(i) for i in open_ids}, policy, identity, limit)
    frame = Frame(frame_type=FrameType.REQ, id=MessageId(rid), cap=cap, payload=payload)
    applying = [outcome for outcome, applies in REQ_RULES if applies(side, frame)]  # type: ignore[arg-type]
    if no_rule_applies(side, frame):  # type: ignore[arg-type]
        assert applying == []
    common = cap is not None and not payload and policy is not None
    assert no_rule_applies(side, frame) == (
        common and rid not in open_ids and len(open_ids) < limit
    )  # type: ignore[arg-type]
