"""capdag 1.524.58's planner (test-only) driven over cap JSON, and a generator of cap sets.

The generated sets draw from a small media vocabulary with refinements of one another, so
conformance, equivalence, ForEach, several outputs, an output that carries its input,
generators, sinks, caps on ``media:`` and cycles all occur.
"""

from __future__ import annotations

from typing import Any, Final

from hypothesis import strategies as st

#: Types the generated caps take and give: atoms, refinements, the top type.
VOCABULARY: Final = (
    "media:a",
    "media:b",
    "media:c",
    "media:a;x",
    "media:b;x",
    "media:a;b",
    "media:c;y=1",
    "media:",
)
#: Where queries end (the vocabulary, a refinement no cap names, a respelling, a stranger).
QUERY_TYPES: Final = (*VOCABULARY[:-1], "media:a;x;z", "media:x;a", "media:d")
#: Where queries start: those, the top type and the unit type (where generators apply).
SOURCE_TYPES: Final = (*QUERY_TYPES, "media:", "media:void")


def _arg(name: str, media: str, sequence: bool, stdin: bool = True) -> dict[str, Any]:
    source = {"stdin": media} if stdin else {"cli_flag": f"--{name}"}
    return {"media_urn": media, "name": name, "required": True, "sources": [source],
            "is_sequence": sequence, "streaming": False}  # fmt: skip


def _out(name: str, media: str, sequence: bool, carries: bool = False) -> dict[str, Any]:
    out = {"media_urn": media, "name": name, "output_description": name, "optional": False,
           "is_sequence": sequence, "streaming": False}  # fmt: skip
    if carries:
        out["carries"] = "input"
    return out


def _quoted(media: str) -> str:
    return f'"{media}"'


@st.composite
def cap_json(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """One cap: an input type (sometimes void: a generator), an output type (sometimes void:
    a sink), sequence flags, and perhaps another output and a carried one."""
    source = draw(st.sampled_from((*VOCABULARY, "media:void")))
    target = draw(st.sampled_from((*VOCABULARY[:-1], "media:void")))
    urn = f"cap:in={_quoted(source)};op=op{index};out={_quoted(target)}"
    # Now and then a cap takes data but no argument is its main input (a refused cap set).
    stdin = draw(st.integers(0, 30)) != 0
    args = [] if source == "media:void" else [_arg("in0", source, draw(st.booleans()), stdin)]
    outputs = [] if target == "media:void" else [_out("out0", target, draw(st.booleans()))]
    if target != "media:void" and draw(st.integers(0, 3)) == 0:
        other = draw(st.sampled_from(VOCABULARY[:-1]))
        outputs.append(_out("extra", other, draw(st.booleans())))
    if target != "media:void" and draw(st.integers(0, 5)) == 0:
        outputs.append(_out("same", source if source != "media:void" else "media:a", False, True))
    return {"urn": urn, "title": f"op{index}", "aliases": [f"op{index}"], "args": args,
            "outputs": outputs}  # fmt: skip


@st.composite
def cap_sets(draw: st.DrawFn, max_caps: int = 9) -> list[dict[str, Any]]:
    """The identity cap, then 1 to ``max_caps`` generated caps (ops numbered apart)."""
    count = draw(st.integers(1, max_caps))
    identity = {"urn": "cap:effect=none", "title": "Identity", "aliases": ["identity"],
                "args": [_arg("input", "media:", False)],
                "outputs": [_out("output", "media:", False)]}  # fmt: skip
    return [identity, *(draw(cap_json(i)) for i in range(count))]


class ReferenceRegistry:
    """The look-ups capdag's knitting asks a registry for: caps by canonical URN, no aliases,
    media with no validation rules."""

    def __init__(self, caps: list[Any]) -> None:
        self._caps = {cap.urn.to_string(): cap for cap in caps}

    def get_cached_cap(self, urn: str) -> Any:
        return self._caps.get(urn)

    def resolve_alias_cached(self, name: str) -> str | None:
        return None

    def get_cached_media_def(self, urn: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(validation=None, schema=None, title=urn)


def reference_fab(caps_json: list[dict[str, Any]]) -> tuple[Any, ReferenceRegistry]:
    """capdag's planner graph of the caps, and a registry to knit with."""
    from capdag.cap.definition import Cap
    from capdag.planner.live_cap_fab import LiveCapFab

    caps = [Cap.from_dict(data) for data in caps_json]
    fab = LiveCapFab()
    fab.sync_from_caps(caps)
    return fab, ReferenceRegistry(caps)


def reference_paths(
    fab: Any,
    registry: ReferenceRegistry,
    source: str,
    target: str,
    *,
    is_sequence: bool,
    max_depth: int,
    limit: int,
) -> list[tuple[str, tuple[str, ...], str | None]]:
    """Each path capdag finds: its description, its caps and its canonical line-based text
    (or the class name of the knitting error)."""
    from capdag.machine import serializer
    from capdag.urn.media_urn import MediaUrn

    strands = fab.find_paths_to_exact_target(
        MediaUrn.from_string(source), MediaUrn.from_string(target), is_sequence, max_depth, limit
    )
    found = []
    for strand in strands:
        caps = tuple(str(s.get_cap_urn()) for s in strand.steps if s.is_cap())
        try:
            machine = strand.knit(registry)
            text = serializer.to_machine_notation_formatted(machine, serializer.FORMAT_LINE_BASED)
        except Exception as error:
            text = type(error).__name__
        found.append((strand.description, caps, text))
    return found


def reference_reachable(
    fab: Any, source: str, *, is_sequence: bool, max_depth: int
) -> list[tuple[str, int, int]]:
    """capdag's reachable targets as (media URN, fewest steps, arrivals)."""
    from capdag.urn.media_urn import MediaUrn

    return [
        (str(t.media_def), t.min_path_length, t.path_count)
        for t in fab.get_reachable_targets(MediaUrn.from_string(source), is_sequence, max_depth)
    ]
