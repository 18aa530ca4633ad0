"""A tool cartridge: the weather of a city, from a fixed table (no network).

Set ``AGENT_WEATHER_FAIL_ONCE`` to a file path to make the first call fail (and create the
file), so a resumed run can be shown to call it again and only it.
"""

from __future__ import annotations

import json
import os

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, OpError, Request

QUERY = "media:weather-query;json"
WEATHER = 'cap:in="media:weather-query;json";op=weather;out="media:tool-output;enc=utf-8"'
TABLE = {"Oslo": "4 °C and rain", "Lisbon": "19 °C and sun"}

manifest = Manifest.build(
    name="agent-weather",
    version="1.0.0",
    description="The weather of a city",
    caps=[CapDef.simple(WEATHER, "Weather", aliases="weather", description="Weather by city")],
)
runtime = CartridgeRuntime(manifest)


def _first_time(flag: str) -> bool:
    """Whether ``flag`` did not exist (it does now)."""
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


@runtime.op(WEATHER)
async def weather(req: Request) -> None:
    query = json.loads(await req.take_input().require_stream_str(QUERY))
    flag = os.environ.get("AGENT_WEATHER_FAIL_ONCE")
    if flag and _first_time(flag):
        raise OpError("UPSTREAM_DOWN", "the weather service is down (once)", "environment")
    city = query.get("city", "")
    if city not in TABLE:
        raise OpError("UNKNOWN_CITY", f"no weather for {city!r}", "input")
    await req.output().emit_text(TABLE[city])


if __name__ == "__main__":
    runtime.run()
