"""What a handler gets: the :class:`Op` base class and its two contexts.

:class:`DryContext` holds plain values that describe the call (cap URN, request id, negotiated
limits, network policy word, dry-run flag); :class:`WetContext` is a typed key-value store holding
the :class:`~cartridge_runtime.runtime.Request`, whose lookups fall back to the resources of the
cartridge-wide context (:class:`~cartridge_runtime.runtime.CartridgeContext`) without copying
them. Both are built for each request, from the cartridge context. No ``repr`` prints values
(they may be secrets or payloads): keys only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

import attrs

from cartridge_runtime.protocol import Limits

if TYPE_CHECKING:
    from ._request import Request

T = TypeVar("T")


@attrs.frozen(kw_only=True, repr=False)
class DryContext:
    """Plain facts about one call, built for that call (``repr`` names the fields only)."""

    cap_urn: str  #: the cap URN the request named
    handler_urn: str  #: the registered cap URN that serves it
    limits: Limits  #: the negotiated limits
    policy: str | None = None  #: the network policy word when the request started
    dry_run: bool = False  #: plan only, do no work (never set by the wire protocol)
    cartridge: str = ""  #: the cartridge's name (the manifest's)
    #: the request's message id (``None`` in CLI mode); :attr:`request_id` is its text
    message_id: Any = None

    @property
    def request_id(self) -> str:
        """The request's message id as text (``""`` in CLI mode); made when first read."""
        return "" if self.message_id is None else str(self.message_id)

    def __repr__(self) -> str:
        return f"DryContext(keys={_DRY_KEYS!r})"


_DRY_KEYS: list[str] = [
    "cap_urn",
    "handler_urn",
    "limits",
    "policy",
    "dry_run",
    "cartridge",
    "request_id",
]


class Key(Generic[T]):
    """A typed key of a :class:`WetContext` (``REQUEST: Key[Request] = Key("request")``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Key({self.name!r})"


#: Where the runtime puts the request in every :class:`WetContext`.
REQUEST_KEY: Key[Request] = Key("request")
_REQUEST_NAME = REQUEST_KEY.name
_MISSING = object()


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class WetContext:
    """A typed key-value store for live objects: the request and any resources.

    ``wet[KEY]`` / ``wet.get(KEY, default)`` / ``wet.set(KEY, value)``; keys are
    :class:`Key` objects (plain strings work too). A key this request did not set is looked up
    in ``shared`` (the cartridge context's resources), read live, never copied; ``set`` only
    ever writes this request's own entries. ``repr`` lists keys only.
    """

    __slots__ = ("_cartridge", "_items", "_shared")

    def __init__(
        self,
        items: Mapping[str, Any] | None = None,
        *,
        shared: Mapping[str, Any] | None = None,
        cartridge: Any = None,
    ) -> None:
        self._items: dict[str, Any] = dict(items or {})
        self._shared: Mapping[str, Any] = shared if shared is not None else _EMPTY
        self._cartridge = cartridge

    @staticmethod
    def _name(key: Key[Any] | str) -> str:
        return key.name if isinstance(key, Key) else key

    def set(self, key: Key[T] | str, value: T) -> None:
        self._items[self._name(key)] = value

    @overload
    def get(self, key: Key[T]) -> T | None: ...
    @overload
    def get(self, key: Key[T], default: T) -> T: ...
    @overload
    def get(self, key: str, default: Any = None) -> Any: ...
    def get(self, key: Key[Any] | str, default: Any = None) -> Any:
        name = self._name(key)
        items = self._items
        if name in items:
            return items[name]
        return self._shared.get(name, default)

    def __getitem__(self, key: Key[T] | str) -> T:
        name = key.name if isinstance(key, Key) else key
        items = self._items
        if name in items:
            return cast(T, items[name])
        try:
            return cast(T, self._shared[name])
        except KeyError:
            raise KeyError(f"WetContext has no {name!r}") from None

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (Key, str)):
            return False
        name = self._name(key)
        return name in self._items or name in self._shared

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._shared), **dict.fromkeys(self._items)})

    def derive(self, **extra: Any) -> WetContext:
        """A context with more entries of its own (the original is untouched; the shared
        resources stay shared)."""
        return WetContext({**self._items, **extra}, shared=self._shared, cartridge=self._cartridge)

    @property
    def cartridge(self) -> Any:
        """The :class:`~cartridge_runtime.runtime.CartridgeContext` this request came from
        (``None`` for a context made by hand)."""
        return self._cartridge

    @property
    def request(self) -> Request:
        """The request being served."""
        # What self[REQUEST_KEY] finds, read straight from this request's own entries
        # (where the runtime puts it): handlers read it on every call.
        request = self._items.get(_REQUEST_NAME, _MISSING)
        return self[REQUEST_KEY] if request is _MISSING else cast("Request", request)

    def __repr__(self) -> str:
        return f"WetContext(keys={sorted(self)!r})"


@attrs.frozen(kw_only=True)
class OpMetadata:
    """What an :class:`Op` says about itself."""

    name: str
    description: str = ""


class Op:
    """A cap handler. Subclass it and implement :meth:`perform` (async, or a plain ``def``,
    which then runs in a worker thread). The runtime makes a fresh instance per request.

    Example::

        class Echo(Op):
            async def perform(self, dry: DryContext, wet: WetContext) -> None:
                req = wet.request
                out = req.output()
                async for stream in req.take_input():
                    async for chunk in stream.chunks():
                        await out.write(chunk)
    """

    def perform(self, dry: DryContext, wet: Any) -> Awaitable[None] | None:  # pragma: no cover
        """Serve one request. Override it as ``async def perform(self, dry: DryContext, wet:
        WetContext) -> None``, or as a plain ``def perform(self, dry: DryContext, wet:
        BlockingWetContext) -> None`` that runs in a worker thread (``wet`` is typed ``Any``
        here so that either override type-checks)."""
        raise NotImplementedError

    def metadata(self) -> OpMetadata:
        """Name and description (defaults to the class name and docstring's first line)."""
        doc = (type(self).__doc__ or "").strip().splitlines()
        return OpMetadata(name=type(self).__name__, description=doc[0] if doc else "")


class FunctionOp(Op):
    """Adapts ``async def handler(req)`` (the ``@runtime.op(cap)`` decorator form) to :class:`Op`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await self._fn(wet.request)

    def metadata(self) -> OpMetadata:
        doc = (self._fn.__doc__ or "").strip().splitlines()
        return OpMetadata(
            name=getattr(self._fn, "__name__", "op"), description=doc[0] if doc else ""
        )


class SyncFunctionOp(Op):
    """Adapts a plain ``def handler(req)``; it runs in a worker thread like any sync ``perform``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def perform(self, dry: DryContext, wet: Any) -> None:
        self._fn(wet.request)

    def metadata(self) -> OpMetadata:
        doc = (self._fn.__doc__ or "").strip().splitlines()
        return OpMetadata(
            name=getattr(self._fn, "__name__", "op"), description=doc[0] if doc else ""
        )
