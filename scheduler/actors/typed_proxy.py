"""Typed pykka proxies: declare once what an actor answers, and mypy checks every call to it.

Declare the proxy type beside its actor, with `proxy_method` and pykka's `proxy_field`::

    class CounterProxy(ActorMemberMixin, pykka.ActorProxy[Counter]):
        add = proxy_method(Counter.add)

    counter = start_proxy(Counter, CounterProxy, 10)  # constructor arguments checked by mypy
    counter.add(1).get(timeout=5)  # an int, to mypy
    counter.add.defer(1)  # arguments checked too; no future

`proxy_method` is pykka's, typed also for `defer` (pykka's types only the call).

`start_proxy` and `typed_proxy` check at run time that the proxy type declares nothing its actor
lacks (`mismatches`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast

import pykka
from pykka.typing import ActorMemberMixin, proxy_field

__all__ = [
    "ActorMemberMixin",
    "ProxyCall",
    "ProxyTypeError",
    "mismatches",
    "proxy_field",
    "proxy_method",
    "start_proxy",
    "typed_proxy",
]

A = TypeVar("A", bound=pykka.Actor)
P = TypeVar("P")
Params = ParamSpec("Params")
R = TypeVar("R")


class ProxyCall(Protocol, Generic[Params, R]):
    """An actor's method as its proxy exposes it: a call answers a future of its result;
    `defer` sends the same message and answers nothing."""

    def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> pykka.Future[R]: ...

    def defer(self, *args: Params.args, **kwargs: Params.kwargs) -> None: ...


class ProxyMethod(Protocol, Generic[Params, R]):
    """The descriptor a proxy class declares: read on a proxy, a `ProxyCall`."""

    def __get__(self, instance: Any, owner: type | None = None) -> ProxyCall[Params, R]: ...


def proxy_method(method: Callable[Concatenate[Any, Params], R]) -> ProxyMethod[Params, R]:
    """Declare `method` of the actor on its proxy type (the actor's own function object, so
    `mismatches` can tell it is the right one)."""
    return cast(ProxyMethod[Params, R], method)


class ProxyTypeError(TypeError):
    """A proxy type declares a member its actor does not have, or under another name."""


def typed_proxy(ref: pykka.ActorRef[A], proxy_type: type[P]) -> P:
    """The proxy of the actor behind `ref`, typed as `proxy_type`; `ProxyTypeError` if it does
    not fit the actor's class."""
    found = mismatches(ref.actor_class, proxy_type)  # a few microseconds, once per actor
    if found:
        raise ProxyTypeError(
            f"{proxy_type.__name__} does not fit {ref.actor_class.__name__}: {'; '.join(found)}; "
            "declare each member with proxy_method/proxy_field from the actor's own attribute "
            "of the same name"
        )
    return cast(P, ref.proxy())


def start_proxy(
    actor_class: Callable[Params, A],
    proxy_type: type[P],
    /,
    *args: Params.args,
    **kwargs: Params.kwargs,
) -> P:
    """Start `actor_class` with its constructor's arguments (checked by mypy) and return its
    proxy, typed as `proxy_type`."""
    ref = cast(type[A], actor_class).start(*args, **kwargs)
    return typed_proxy(ref, proxy_type)


def mismatches(actor_class: type[pykka.Actor], proxy_type: type[Any]) -> list[str]:
    """What `proxy_type` declares that `actor_class` does not have, one line each (empty when it
    fits): a member the actor lacks, or a `proxy_method` of one method under another's name."""
    found: list[str] = []
    for klass in proxy_type.__mro__:
        if klass in (object, ActorMemberMixin, pykka.ActorProxy) or klass.__module__ == "typing":
            continue
        for name, declared in vars(klass).items():
            if name.startswith("__"):
                continue
            if not hasattr(actor_class, name):
                found.append(f"{proxy_type.__name__}.{name}: {actor_class.__name__} has no {name}")
            elif callable(declared) and declared is not getattr(actor_class, name):
                wrapped = getattr(declared, "__qualname__", repr(declared))
                found.append(
                    f"{proxy_type.__name__}.{name} is declared from {wrapped}, not from "
                    f"{actor_class.__name__}.{name}"
                )
    return found
