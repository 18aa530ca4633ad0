"""One step call's bookkeeping: its byte counts, and what the step cache needs of its inputs.

:class:`StepTally` counts one step run's bytes and says whether the step cache answered it.
:class:`CallInputs` gathers, while the runner builds a call's inputs, each input's digest: a
value held whole is hashed only if the key is wanted (lazily); a streamed value either came
with its digest (a replayed output, a machine input) or is hashed as it passes, so its key is
known only once it ended (MCH-25): the call either holds it until then to look the key up
first (early cut-off, MCH-29) or is made at once and stored under the key known at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from ...machine import Step
from .._inputs import ItemStream, ValueStream
from ._cache_follow import Leader
from ._cache_key import InputDigest, PieceHasher, hashing, step_key
from ._spool import Spool

if TYPE_CHECKING:
    from ._cache import CacheEntry, EntryWriter
    from ._node_stream import NodeReader, NodeStream

__all__ = ("StepTally", "CallInputs")


class StepTally:
    """One step run's counts, over its attempts."""

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.cache = ""  #: "hit", "miss", or "" (not cached)


class _Later:
    """A streamed input whose producer gives its digest once the value ended."""

    def __init__(self, flow: NodeStream) -> None:
        self.flow = flow
        self.complete = False

    def digest(self) -> InputDigest | None:
        digest: InputDigest | None = self.flow.digest
        return digest


async def _watching(pieces: AsyncIterator[Any], later: _Later) -> AsyncIterator[Any]:
    async for piece in pieces:
        yield piece
    later.complete = True


class CallInputs:
    """What one call's inputs are, for the step cache (see the module docstring)."""

    def __init__(self, tally: StepTally, active: bool) -> None:
        self.tally = tally
        self.active = active
        self._digests: list[Callable[[], InputDigest] | InputDigest | PieceHasher | _Later] = []
        self.urns: list[str] = []
        self.readers: list[NodeReader] = []
        self.identity: str | None = None
        self.entry: CacheEntry | None = None
        self.writer: EntryWriter | None = None
        #: The :class:`Recording` of a miss's response (it says whether the response ended).
        self.recordings: list[Any] = []
        self.stream_to: dict[str, NodeStream | None] = {}
        #: Per input index, a streamed input hashed as it passes: (its pieces, a sequence).
        self._unknown: dict[int, tuple[AsyncIterator[Any], bool]] = {}
        #: How far the calls storing this call's streamed inputs got (their ``Leader``s).
        self.leaders: list[Any] = []
        #: The inputs held until they ended (early cut-off), by input index.
        self.spools: dict[int, Spool] = {}

    # -- while the inputs are built ---------------------------------------------------------

    def known(
        self, digest: Callable[[Iterable[Any], bool], InputDigest], pieces: Any, seq: bool
    ) -> None:
        """An input held whole: its digest, computed only if a key is made."""
        if self.active:
            self._digests.append(lambda: digest(pieces, seq))

    def streamed(
        self, flow: NodeStream, pieces: AsyncIterator[Any], sequence: bool
    ) -> AsyncIterator[Any]:
        """A streamed input: the digest its flow came with, the one its producer (a call being
        stored) gives when the value ended, or else a hasher its pieces pass through."""
        if not self.active:
            return pieces
        if flow.digest is not None:
            self._digests.append(flow.digest)
            if flow.stored_by is not None:  # an input file, a replayed blob
                self.leaders.append(flow.stored_by)
            return pieces
        if flow.digest_later:
            if flow.stored_by is not None:
                self.leaders.append(flow.stored_by)
            later = _Later(flow)
            self._digests.append(later)
            return _watching(pieces, later)
        hasher = PieceHasher(sequence)
        self._unknown[len(self._digests)] = (hashing(pieces, hasher), sequence)
        self._digests.append(hasher)
        return self._unknown[len(self._digests) - 1][0]

    # -- early cut-off ------------------------------------------------------------------------

    @property
    def can_hold(self) -> bool:
        """Whether every input whose digest is not known yet is one this call hashes itself
        (none streams from a call being stored, which gives its digest only at its end)."""
        return bool(self._unknown) and not any(isinstance(d, _Later) for d in self._digests)

    async def hold(
        self, inputs: list[tuple[str, Any]], new_file: Callable[[str], tuple[IO[bytes], Path]]
    ) -> None:
        """Read every input hashed here to its end (all at once, so no producer waits on a
        reader nobody reads), and make each of them an input that sends what was held."""
        spools = {i: Spool(new_file, seq) for i, (_, seq) in self._unknown.items()}
        self.spools = spools
        try:
            if len(spools) == 1:  # the usual case: its error is raised as it is
                ((index, spool),) = spools.items()
                await spool.fill(self._unknown[index][0])
            else:
                async with anyio.create_task_group() as tg:
                    for index, spool in spools.items():
                        tg.start_soon(spool.fill, self._unknown[index][0])
        except BaseException:
            self.release()
            raise
        for index, spool in spools.items():
            urn = inputs[index][0]
            held = spool.pieces()
            inputs[index] = (urn, ItemStream(held) if spool.sequence else ValueStream(held))

    def release(self) -> None:
        """Drop what :meth:`hold` held (a hit, a failed call, the end of the call)."""
        for spool in self.spools.values():
            spool.discard()

    # -- the key ------------------------------------------------------------------------------

    def key(self, step: Step, *, after: bool = False) -> str | None:
        """The call's key; None while a streamed input's digest is not known (before the
        call), or when a streamed input was not read to its end (after it)."""
        assert self.identity is not None
        known: list[tuple[str, InputDigest]] = []
        for index, (urn, source) in enumerate(zip(self.urns, self._digests, strict=True)):
            digest: InputDigest | None
            if isinstance(source, PieceHasher | _Later):
                if not (after and source.complete):
                    return None
                digest = source.digest()
                if digest is None:
                    return None
            elif isinstance(source, InputDigest):
                digest = source
            else:
                digest = source()
                self._digests[index] = digest
            known.append((urn, digest))
        return step_key(step.cap.text, self.identity, step.policy.to_notation(), known)

    # -- a hit --------------------------------------------------------------------------------

    def digest_of(self, stream_id: str) -> InputDigest | None:
        """A replayed stream's digest (for the steps it feeds); None for a real call."""
        if self.entry is None:
            return None
        index = int(stream_id.rsplit("-", 1)[1])
        return self.entry.outputs[index].digest

    def source_of(self, stream_id: str, blob_path: Callable[[str], Path]) -> Leader | None:
        """A replayed ``bytes`` stream's blob as the complete source of its bytes (a step it
        feeds that repeats them stores no copy of its own); None for a real call."""
        if self.entry is None:
            return None
        out = self.entry.outputs[int(stream_id.rsplit("-", 1)[1])]
        if out.kind != "bytes":
            return None
        return Leader.complete(blob_path(out.blob), out.size, out.digest)

    def wanted(self, stream_id: str) -> bool:
        flow = self.stream_to.get(stream_id)
        return flow is not None and flow.wanted

    def set_urns(self, inputs: Sequence[tuple[str, Any]]) -> None:
        self.urns = [urn for urn, _ in inputs]
