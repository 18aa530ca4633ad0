"""Types of the optional compiled codec fast paths (``_speedups.c``)."""

from typing import Any

def configure(
    *,
    spec: dict[int, tuple[str, int]],
    dumps: Any,
    frame_types: dict[Any, Any],
    frame_type_ints: dict[Any, Any],
    id_cache: dict[Any, Any],
    new_id: Any,
    frame_class: type,
    checks: dict[Any, Any],
    required: dict[Any, tuple[str, ...]],
    key_of: dict[str, int],
    stream_start: Any,
    hard_cap: int,
    id_class: type,
    id_cache_max: int,
) -> None: ...
def map_to_frame(m: Any, /) -> Any: ...
def decode_direct(data: bytes | bytearray | memoryview, start: int, stop: int, /) -> Any: ...
def take_frame(
    data: bytes | bytearray | memoryview, offset: int, max_frame: int, /
) -> tuple[Any, int] | None: ...
def scan_prefixes(data: bytes | bytearray | memoryview, offset: int, max_frame: int, /) -> int: ...
def take_frames(
    data: bytes | bytearray | memoryview, offset: int, max_frame: int, /
) -> tuple[list[Any], int]: ...
def encode_small(
    frame_dict: dict[str, Any], seq: int | None, max_frame: int, /
) -> bytes | None: ...
def configure_receiver(
    *,
    inputs: tuple[Any, ...],
    request_states: tuple[Any, ...],
    stream_states: tuple[Any, ...],
    stream_class: type,
    decode_scalar: Any,
    events: tuple[type, ...],
    event_fields: tuple[tuple[str, ...], ...],
) -> None: ...
def receive_fast(receiver: Any, frame: Any, /) -> list[Any] | None: ...
def configure_numbering(kinds: bytes, /) -> None: ...
def encode_numbered(
    counters: dict[Any, int],
    closed: dict[Any, None],
    max_closed: int,
    frames: list[Any],
    start: int,
    out: list[Any],
    max_frame: int,
    /,
) -> int: ...
def serve_flow_fast(requests: dict[Any, Any], fallback: Any, frame: Any, /) -> Any: ...
def encode_flow(frames: list[Any] | tuple[Any, ...], max_frame: int, out: list[Any], /) -> int: ...
def id_hash_method() -> Any: ...
def configure_response(
    *,
    frame_types: tuple[Any, ...],
    frame_class: type,
    flow_class: type,
    receiver_class: type,
    stream_class: type,
    request_states: tuple[Any, ...],
    stream_states: tuple[Any, ...],
    deque_class: type,
    outputs: tuple[type, ...],
    credit_dir: Any,
) -> None: ...
def route_response(core: Any, fallback: Any, frame: Any, /) -> None: ...
def configure_request(
    *, frame_class: type, frame_types: tuple[Any, ...], version: int, content_type: str
) -> None: ...
def request_frames(
    rid: Any,
    xid: Any,
    cap: str,
    inputs: list[tuple[str, Any]],
    max_chunk: int,
    credit: int,
    max_total: int,
    /,
) -> list[Any] | None: ...
def ready(value: Any, /) -> Any: ...
def configure_ids(urandom: Any, /) -> None: ...
def forget_ids() -> None: ...
def new_id() -> Any: ...
def int_id(n: int, /) -> Any: ...
def configure_delivery(
    flow_types: tuple[Any, ...],
    stream_data: type,
    stream_closed: type,
    body_ended: type,
    data_tag: object,
    end_entry: tuple[object, ...],
    pass_through_min: int,
    /,
) -> None: ...
def deliver_flow(
    conn: Any,
    requests: Any,
    outbox: Any,
    ready_table: Any,
    active: Any,
    fallback: Any,
    deliver: Any,
    frame: Any,
    /,
) -> None: ...
def queue_frames(outbox: Any, stream: Any, frames: list[Any], chunk_type: Any, /) -> int: ...
def configure_outputs(
    frame_class: type,
    frame_types: tuple[Any, ...],
    states: tuple[Any, ...],
    version: int,
    coalesce_bytes: int,
    /,
) -> None: ...
def open_small(stream: Any, data: Any, now: float, /) -> list[Any] | None: ...
def close_small(stream: Any, /) -> list[Any] | None: ...
def end_frame(rid: Any, xid: Any, progress: float, message: str | None, /) -> Any: ...
def held_while_running(outbox: Any, coro: Any, /) -> Any: ...
def configure_served(
    served_class: type, receiver_class: type, queued: Any, expect_req: Any, credit_dir: Any, /
) -> None: ...
def new_served(
    rid: Any, xid: Any, cap: str, handler_urn: str, handler: Any, pool: str, initial_credit: int, /
) -> Any: ...
def slot_maker(cls: type, names: tuple[str, ...], /) -> Any: ...
def make_slotted(maker: Any, /, *values: Any) -> Any: ...
def request_wire(
    rid: Any,
    xid: Any,
    cap: str,
    inputs: list[tuple[str, Any]],
    max_chunk: int,
    credit: int,
    max_total: int,
    max_frame: int,
    /,
) -> bytes | None: ...
def install_id_hash(cls: type, /) -> bool: ...
def route_block(core: Any, data: Any, max_frame: int, /) -> int: ...
def new_receiver(rid: Any, xid: Any, initial_credit: int, /) -> Any: ...
def configure_forwarding(frame_types: tuple[Any, ...], /) -> None: ...
def relay_to_cartridge(forwards: dict[Any, Any], fallback: Any, frame: Any, /) -> None: ...
def relay_to_switch(route: tuple[Any, ...], frame: Any, /) -> None: ...
def relay_to_app(core: Any, fallback: Any, frame: Any, /) -> None: ...
