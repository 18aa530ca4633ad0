"""A request's input that breaks: every stream not read to its end raises the error, a stream
already read to its end keeps what it gave, and waiting for a further stream raises it too."""

from __future__ import annotations

import pytest

from cartridge_runtime.runtime import InputStreamError
from cartridge_runtime.runtime._input import InputStream, StreamFeed
from cartridge_runtime.runtime._input_package import PackageFeed


@pytest.mark.asyncio
async def test_a_broken_input_fails_only_the_streams_not_read_to_their_end() -> None:
    feed = PackageFeed()
    read, unread = InputStream("s1", "media:"), InputStream("s2", "media:")
    for stream, data in ((read, b"whole"), (unread, b"part")):
        StreamFeed(stream).push_data(data)
        feed.add(stream)
    StreamFeed(read).push_end()
    assert await read.collect_bytes() == b"whole"
    feed.fail(RuntimeError("the sender went away"))
    with pytest.raises(InputStreamError, match="the sender went away"):
        await unread.collect_bytes()
    with pytest.raises(InputStreamError, match="the sender went away"):
        await feed.package.streams()  # waiting for a further stream
    assert await read.collect_bytes() == b""  # read to its end before: nothing more, no error
