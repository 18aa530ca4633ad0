"""The cartridge-wide context: built once per runtime, specialised per call.

Theory of operation: a :class:`CartridgeContext` holds what every request shares — resources
the cartridge adds (a loaded model, a connection pool) and the start-up and shutdown hooks that
make and release them. :meth:`CartridgeContext.lifespan` runs the hooks around serving (CBOR
mode, CLI mode, the harness); nested or repeated serving in one process shares one start-up
while any is open. For each request the runtime derives a :class:`DryContext` (plain facts of
that call, built for it) and a :class:`WetContext` whose lookups fall back to the cartridge's
resources *without copying them*: a value a handler ``set``s stays in its request.

No ``repr`` here prints a value: resources may be secrets (keys only).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar, cast, overload

from cartridge_runtime.protocol import Limits, slotted_maker

from ._context import REQUEST_KEY, DryContext, Key, WetContext

__all__ = ("CartridgeContext", "Hook")

#: A :class:`DryContext` from its fields in this order, in one C call (``None``: not compiled).
_make_dry = slotted_maker(
    DryContext,
    ("cap_urn", "handler_urn", "limits", "policy", "dry_run", "cartridge", "message_id"),
)

T = TypeVar("T")

#: A start-up or shutdown hook: ``fn(context)``, a plain function or a coroutine function.
Hook = Callable[["CartridgeContext"], Awaitable[None] | None]


class CartridgeContext:
    """What every request of one cartridge shares: resources and lifecycle hooks.

    ``ctx.set(KEY, value)`` / ``ctx[KEY]`` / ``ctx.get(KEY, default)`` with :class:`Key`
    objects (or plain strings). A handler reaches them through its ``wet`` context
    (``wet[KEY]``) or ``wet.cartridge``.

    :ivar name: the cartridge's name (the manifest's).
    """

    __slots__ = ("_items", "_shutdown", "_startup", "_users", "name")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._items: dict[str, Any] = {}
        self._startup: list[Hook] = []
        self._shutdown: list[Hook] = []
        self._users = 0

    # -- resources -------------------------------------------------------------------------

    @staticmethod
    def _name(key: Key[Any] | str) -> str:
        return key.name if isinstance(key, Key) else key

    def set(self, key: Key[T] | str, value: T) -> None:
        """Add or replace a resource shared by every request."""
        self._items[self._name(key)] = value

    def remove(self, key: Key[Any] | str) -> None:
        """Drop a resource (absent: nothing happens); a shutdown hook's usual last step."""
        self._items.pop(self._name(key), None)

    @overload
    def get(self, key: Key[T]) -> T | None: ...
    @overload
    def get(self, key: Key[T], default: T) -> T: ...
    @overload
    def get(self, key: str, default: Any = None) -> Any: ...
    def get(self, key: Key[Any] | str, default: Any = None) -> Any:
        """A resource, or ``default``."""
        return self._items.get(self._name(key), default)

    def __getitem__(self, key: Key[T] | str) -> T:
        try:
            return cast(T, self._items[self._name(key)])
        except KeyError:
            raise KeyError(f"the cartridge context has no {self._name(key)!r}") from None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (Key, str)) and self._name(key) in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    @property
    def items(self) -> dict[str, Any]:
        """The resources by name (the live store: a request context reads it, never copies)."""
        return self._items

    def __repr__(self) -> str:
        return f"CartridgeContext(name={self.name!r}, keys={sorted(self._items)!r})"

    # -- per request ----------------------------------------------------------------------

    def dry(
        self,
        *,
        cap_urn: str,
        handler_urn: str,
        limits: Limits,
        policy: str | None = None,
        message_id: Any = None,
    ) -> DryContext:
        """The :class:`DryContext` of one request (a new value for each)."""
        if _make_dry is not None:
            return _make_dry(cap_urn, handler_urn, limits, policy, False, self.name, message_id)
        return DryContext(
            cap_urn=cap_urn,
            handler_urn=handler_urn,
            limits=limits,
            policy=policy,
            message_id=message_id,
            cartridge=self.name,
        )

    def wet(self, request: Any) -> WetContext:
        """The :class:`WetContext` of one request: ``request`` under ``REQUEST_KEY``, every
        resource of this context readable through it (shared, not copied)."""
        return WetContext({REQUEST_KEY.name: request}, shared=self._items, cartridge=self)

    # -- lifecycle -------------------------------------------------------------------------

    def on_startup(self, hook: Hook) -> Hook:
        """Run ``hook(ctx)`` before the cartridge serves (in registration order). Usable as
        a decorator."""
        self._startup.append(hook)
        return hook

    def on_shutdown(self, hook: Hook) -> Hook:
        """Run ``hook(ctx)`` after the cartridge stopped serving (in reverse registration
        order), also when serving failed. Usable as a decorator."""
        self._shutdown.append(hook)
        return hook

    @property
    def started(self) -> bool:
        """Whether the start-up hooks ran and the shutdown hooks have not yet."""
        return self._users > 0

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[CartridgeContext]:
        """Start up (first user), yield, shut down (last user).

        A start-up hook that raises stops the start-up: the shutdown hooks of the hooks that
        did run are not called (there is nothing to match), and the error propagates.
        """
        if self._users == 0:
            for hook in self._startup:
                await _call(hook, self)
        self._users += 1
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                errors: list[BaseException] = []
                for hook in reversed(self._shutdown):
                    try:
                        await _call(hook, self)
                    except Exception as exc:  # every hook runs; the first failure is raised
                        errors.append(exc)
                if errors:
                    raise errors[0]


async def _call(hook: Hook, ctx: CartridgeContext) -> None:
    result = hook(ctx)
    if inspect.isawaitable(result):
        await result
