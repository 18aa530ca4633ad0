"""Running a handler's ``perform``: directly when it is ``async def``, in a worker thread when it
is a plain ``def``.

A synchronous handler sees the same objects, wrapped in :class:`ThreadProxy`: every ``async``
method becomes a blocking call marshalled onto the event loop with :func:`anyio.from_thread.run`,
and every async iterator becomes a plain iterator. Each call first checks whether the request was
cancelled and raises :class:`RequestCancelled` if so, so a cancelled synchronous handler stops at
its next runtime call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from ._context import DryContext, Op, WetContext
from ._errors import RequestCancelled
from ._graph import GraphBatch, GraphGrowth
from ._input import InputStream
from ._input_package import InputPackage
from ._output import OutputStream
from ._peer import PeerCall, PeerInvoker, PeerResponse
from ._request import Request

_WRAPPED = (
    Request,
    InputPackage,
    InputStream,
    OutputStream,
    PeerInvoker,
    PeerCall,
    PeerResponse,
    GraphGrowth,
    GraphBatch,
)


async def _anext(agen: AsyncIterator[Any]) -> Any:
    return await agen.__anext__()


class ThreadProxy:
    """A blocking view of a runtime object, for code running in a worker thread."""

    __slots__ = ("_cancelled", "_obj")

    def __init__(self, obj: Any, cancelled: Callable[[], bool]) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_cancelled", cancelled)

    def _check(self) -> None:
        if self._cancelled():
            raise RequestCancelled("the request was cancelled")

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, _WRAPPED):
            return ThreadProxy(value, self._cancelled)
        if type(value) is list and value and isinstance(value[0], _WRAPPED):
            # streams(), streams_of(), outputs: blocking views of each element too.
            return [ThreadProxy(v, self._cancelled) for v in value]
        return value

    def _iterate(self, agen: AsyncIterator[Any]) -> Iterator[Any]:
        while True:
            self._check()
            try:
                value = anyio.from_thread.run(_anext, agen)
            except StopAsyncIteration:
                return
            yield self._wrap(value)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if not callable(attr) or isinstance(attr, type):
            return self._wrap(attr)
        if inspect.isasyncgenfunction(attr):
            return lambda *a, **k: self._iterate(attr(*a, **k))
        if inspect.iscoroutinefunction(attr):

            def call_async(*a: Any, **k: Any) -> Any:
                self._check()
                return self._wrap(anyio.from_thread.run(functools.partial(attr, *a, **k)))

            return call_async

        def call(*a: Any, **k: Any) -> Any:
            self._check()
            return self._wrap(attr(*a, **k))

        return call

    def __iter__(self) -> Iterator[Any]:
        return self._iterate(self._obj.__aiter__())

    def __repr__(self) -> str:
        return f"ThreadProxy({self._obj!r})"


#: Seconds between keepalive progress frames while a synchronous handler runs.
KEEPALIVE_INTERVAL = 10.0


#: ``perform`` function -> whether it is a coroutine function (inspect's answer, which costs
#: more than a small request's dispatch, asked once per handler class). Bounded.
_IS_ASYNC: dict[Any, bool] = {}
_IS_ASYNC_MAX = 1024


def async_perform(op: Op) -> Callable[[DryContext, WetContext], Awaitable[None]] | None:
    """``op.perform`` when it is a coroutine function (awaited on the event loop as it is),
    else ``None`` (a synchronous handler: :func:`run_perform` runs it in a worker thread).

    A runner awaits the coroutine itself when it can, with no coroutine of its own around it.
    """
    perform = op.perform
    func = getattr(perform, "__func__", perform)
    is_async = _IS_ASYNC.get(func)
    if is_async is None:
        is_async = inspect.iscoroutinefunction(perform)
        if len(_IS_ASYNC) >= _IS_ASYNC_MAX:
            _IS_ASYNC.clear()
        _IS_ASYNC[func] = is_async
    return perform if is_async else None  # type: ignore[return-value]  # a coroutine function


async def run_perform(
    op: Op, dry: DryContext, wet: WetContext, cancelled: Callable[[], bool]
) -> None:
    """Run ``op.perform`` on the event loop or, when synchronous, in a worker thread.

    While a synchronous handler runs, a progress LOG repeating its last reported fraction goes
    out every :data:`KEEPALIVE_INTERVAL` seconds, so the host sees the request is alive even
    when the handler itself stays quiet.
    """
    perform = async_perform(op)
    if perform is not None:
        await perform(dry, wet)
        return
    req = wet.request
    proxied = wet.derive()
    proxied.set("request", ThreadProxy(req, cancelled))
    reporter = req._reporter

    async def keepalive() -> None:
        while True:
            await anyio.sleep(KEEPALIVE_INTERVAL)
            await reporter.progress(getattr(reporter, "last", 0.0), "working")

    # The handler's own exception is kept out of the task group and re-raised after it, so
    # that an OpError (or RequestCancelled) reaches the dispatcher as itself, not wrapped in
    # an ExceptionGroup.
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(keepalive)
        try:
            sync_perform: Callable[[DryContext, WetContext], object] = op.perform
            await anyio.to_thread.run_sync(sync_perform, dry, proxied)
        except Exception as exc:
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
