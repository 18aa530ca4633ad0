"""Which outputs a request answers on (REQ-23, REQ-24): the main output, typed by the cap
URN's effect, then every other declared output in definition order."""

from __future__ import annotations

from typing import Protocol

from cartridge_runtime.manifest import CapDef
from cartridge_runtime.urn import MEDIA_VOID, CapUrn, MediaUrn, UrnError, main_output_media

from ._output import OutputSpec

_VOID = MediaUrn.parse(MEDIA_VOID)


class CapDefinitions(Protocol):
    """Where the definition of a request's cap comes from (the runtime)."""

    def cap_def_for(self, request_urn: str, handler_urn: str) -> CapDef | None: ...


def _main_media(request_urn: str, handler_urn: str) -> tuple[str, bool]:
    """(STREAM_START media of the main output, whether out= is void)."""
    for urn in (request_urn, handler_urn):
        try:
            cap = CapUrn.parse(urn)
            media = main_output_media(cap)
        except UrnError:
            continue
        return str(media), cap.out_spec.is_equivalent(_VOID)
    return "media:", False


def output_specs(runtime: CapDefinitions, request_urn: str, handler_urn: str) -> list[OutputSpec]:
    """The :class:`OutputSpec` list for a request: main first, then the other declared outputs."""
    media, void = _main_media(request_urn, handler_urn)
    definition = runtime.cap_def_for(request_urn, handler_urn)
    declared_main = definition.main_output() if definition is not None and not void else None
    specs = [
        OutputSpec(
            media_urn=media,
            declared_urn=declared_main.media_urn if declared_main is not None else media,
            name=declared_main.name if declared_main is not None else "output",
            is_main=True,
            required=not void and not (declared_main is not None and declared_main.optional),
            is_sequence=declared_main.is_sequence if declared_main is not None else False,
            void=void,
            index=0,
        )
    ]
    if definition is None:
        return specs
    in_text = str(definition.cap_urn.in_spec)
    for out in definition.outputs:
        if out is declared_main:
            continue
        specs.append(
            OutputSpec(
                media_urn=in_text if out.carries == "input" else out.media_urn,
                declared_urn=out.media_urn,
                name=out.name,
                is_main=False,
                required=not out.optional,
                is_sequence=out.is_sequence,
                index=len(specs),
            )
        )
    return specs
