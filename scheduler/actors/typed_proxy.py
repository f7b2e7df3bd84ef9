"""Typed pykka proxies: declare once what an actor answers, and mypy checks every call to it.

A pykka proxy is dynamic (`ActorProxy.__getattr__`): to mypy, `ref.proxy().add(tasks)` is `Any`,
so a renamed method, a missing argument or a wrong type is found only when the call runs, in
another thread. pykka 4 ships the pieces of a static type (`pykka.typing`): a proxy class whose
members are declared with `proxy_method` (a method returning `pykka.Future[R]` for the actor's
`R`, with the actor method's parameters) and `proxy_field` (a field as `pykka.Future[T]`). This
module turns an actor ref into such a type, and checks a proxy type against its actor.

Declare the proxy type beside its actor, in the actor's module (one actor per module)::

    class PartitionScheduler(PartitionActor):
        def add(self, tasks: list[Task]) -> int: ...


    class PartitionSchedulerProxy(ActorMemberMixin, pykka.ActorProxy[PartitionScheduler]):
        add = proxy_method(PartitionScheduler.add)

then make proxies only through this module::

    scheduler = start_proxy(PartitionScheduler, PartitionSchedulerProxy, ctx)  # ctx is checked
    scheduler.add(tasks).get(timeout=ASK_TIMEOUT_S)  # an int, to mypy
    scheduler.add("x")  # mypy: incompatible type "str"; expected "list[Task]"
    me = typed_proxy(self.actor_ref, PartitionSchedulerProxy)  # inside the actor, in on_start

Both calls check at run time, once per pair of classes, that the proxy type declares nothing its
actor lacks (`mismatches`), so a proxy type that drifted from its actor fails where the proxy is
made, not at the first call. `ActorMemberMixin` gives the proxy `stop`, `on_start` and the other
members every actor has.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import pykka
from pykka.typing import ActorMemberMixin, proxy_field, proxy_method

__all__ = [
    "ActorMemberMixin",
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


class ProxyTypeError(TypeError):
    """A proxy type declares a member its actor does not have, or under another name."""


def typed_proxy(ref: pykka.ActorRef[A], proxy_type: type[P]) -> P:
    """The proxy of the actor behind `ref`, typed as `proxy_type` (see the module's docstring).

    Raises `ProxyTypeError` if `proxy_type` does not fit the actor's class."""
    _check(ref.actor_class, proxy_type)
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


_FITTING: set[tuple[type[Any], type[Any]]] = set()
"""Pairs of (actor class, proxy type) checked already: a proxy is made per actor, not per call."""
_FITTING_LOCK = threading.Lock()


def _check(actor_class: type[pykka.Actor], proxy_type: type[Any]) -> None:
    with _FITTING_LOCK:
        if (actor_class, proxy_type) in _FITTING:
            return
    found = mismatches(actor_class, proxy_type)
    if not found:
        with _FITTING_LOCK:
            _FITTING.add((actor_class, proxy_type))
    else:
        raise ProxyTypeError(
            f"{proxy_type.__name__} does not fit {actor_class.__name__}: {'; '.join(found)}; "
            "declare each member with proxy_method/proxy_field from the actor's own attribute "
            "of the same name"
        )
